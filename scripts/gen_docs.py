#!/usr/bin/env python
"""Write the docs' generated reference pages (docs/reference/): the command line, every config key, every results
column, rendered from the code (app/reference.py). Run it after changing a CLI flag, a config key or a column."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.reference import DOCS, PAGES, write_pages  # noqa: E402

if __name__ == "__main__":
    write_pages()
    for relative in PAGES:
        print(DOCS / relative)

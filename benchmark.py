#!/usr/bin/env python
"""Benchmark LLM inference latency and throughput over a YAML sweep.

    python benchmark.py yamls/cpu-tiny.yaml [key=value ...] [--output-dir DIR] [--resume] [--dry-run]
"""

import sys
from pathlib import Path

try:
    from app.cli import main
    from harness.run.exit_now import exit_now
except ModuleNotFoundError as e:
    if (Path(__file__).resolve().parent / (e.name or "").split(".")[0]).is_dir():
        raise  # one of the harness's own packages: a broken checkout, not a missing dependency
    print(f"error: {sys.executable} has no module {e.name!r}: run the harness with the environment `make setup` "
          "builds, e.g. .venv/bin/python benchmark.py yamls/cpu-tiny.yaml", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":  # engines such as vLLM spawn processes that re-import this file
    exit_now(main())  # every file written and synced: the modules' teardown is skipped (harness/run/exit_now.py)

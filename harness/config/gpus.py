"""The GPU datasheet table, harness/peaks.yaml: which GPUs `hardware.gpu` may name, their peaks and memory.

Read at the bottom of the library, so the config can check a name and the model layer can read the figures.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Dict

import yaml

PEAKS_YAML = Path(__file__).parent.parent / "peaks.yaml"


@functools.lru_cache(maxsize=1)
def gpu_table() -> Dict[str, dict]:
    return yaml.safe_load(PEAKS_YAML.read_text())

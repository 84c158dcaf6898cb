"""`opt`: a typed config field with its help text, shared by every config section (harness/config/sweep.py,
harness/config/stream.py, each backend's and workload's options)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from omegaconf import MISSING


def is_int(value: Any) -> bool:
    """An integer as YAML gives it, not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


# accelerate's size units (accelerate.utils.convert_file_size_to_int reads the sizes engines are given).
BINARY_UNITS = {"GIB": 2**30, "MIB": 2**20, "KIB": 2**10}
DECIMAL_UNITS = {"GB": 10**9, "MB": 10**6, "KB": 10**3}  # with a lower-case final b: bits


def size_bytes(size: Any) -> int:
    """Bytes of a size as accelerate reads it (`20GiB`, `5.5GB`, an int), checked without importing it (and
    torch): ValueError for anything else."""
    if is_int(size) and size >= 0:
        return size
    if isinstance(size, str):
        units = {**BINARY_UNITS, **DECIMAL_UNITS}  # binary first: "GIB" also ends in "B"
        unit = next((u for u in units if size.upper().endswith(u)), None)
        if unit is not None:
            try:
                count = int(float(size[:-len(unit)]) * units[unit])
            except ValueError:
                count = -1
            if count >= 0:
                return count // 8 if unit in DECIMAL_UNITS and size.endswith("b") else count
    raise ValueError(f"not a size: {size!r}")


def opt(default: Any = MISSING, *, help: str, factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with a help text; without a default (OmegaConf's MISSING) the key is required."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})

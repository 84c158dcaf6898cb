"""`opt`: a typed config field with its help text, shared by every config section (harness/config.py,
harness/stream_config.py, each backend's and workload's options)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from omegaconf import MISSING


def is_int(value: Any) -> bool:
    """An integer as YAML gives it, not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def opt(default: Any = MISSING, *, help: str, factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with a help text; without a default (OmegaConf's MISSING) the key is required."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})

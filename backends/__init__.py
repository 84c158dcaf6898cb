"""Backend registry: names map to "module:Class" so heavy engines import only when chosen."""

from __future__ import annotations

import importlib
from typing import Any, Dict

from harness.errors import UserError, known_names

BACKENDS: Dict[str, str] = {
    "hf": "backends.hf:HFBackend",
    "accelerate": "backends.accelerate_pp:AccelerateBackend",
    "deepspeed": "backends.deepspeed_tp:DeepSpeedBackend",
    "vllm": "backends.vllm_engine:VLLMBackend",
}


def backend_class(name: str, key: str = "backends[].name") -> type:
    if name not in BACKENDS:
        raise UserError(f"{key}: unknown backend {name!r}{known_names(name, sorted(BACKENDS))}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def resolve_options(raw: Any, key: str):
    """A raw `backends` entry -> that backend's typed options dataclass."""
    from harness.config import to_dataclass

    if not isinstance(raw, dict) or not raw.get("name"):
        raise UserError(f"{key}.name: required; each backend entry needs one of {', '.join(sorted(BACKENDS))}")
    cls = backend_class(str(raw["name"]), f"{key}.name")
    return to_dataclass(cls.Options, raw, key)

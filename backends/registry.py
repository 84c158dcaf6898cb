"""Backend registry: names map to "module:Class" so heavy engines import only when chosen."""

from __future__ import annotations

from typing import Tuple

from harness.config.registry import Registry
from harness.plan.engine import EngineClass

BACKENDS: Registry[EngineClass] = Registry("backend", {
    "hf": "backends.generate.hf:HFBackend",
    "accelerate": "backends.generate.accelerate_pp:AccelerateBackend",
    "deepspeed": "backends.generate.deepspeed_tp:DeepSpeedBackend",
    "deepspeed_zero": "backends.generate.deepspeed_zero:ZeroBackend",
    "vllm": "backends.vllm_engine:VLLMBackend",
    "openai": "backends.openai_compat.backend:OpenAIBackend",
    "synthetic": "backends.synthetic:SyntheticBackend",
})


def engine_distributions() -> Tuple[str, ...]:
    """Every registered engine's `distributions`, each once, in the table's order: what the manifest records the
    versions of besides the harness's own (harness/measure/manifest.py). Cheap: an engine module imports its engine
    (torch, vLLM, DeepSpeed) only where it runs."""
    return tuple(dict.fromkeys(d for name in BACKENDS.table for d in BACKENDS.get(name, "backends").distributions))

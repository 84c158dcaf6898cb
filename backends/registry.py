"""Backend registry: names map to "module:Class" so heavy engines import only when chosen."""

from __future__ import annotations

from harness.config.registry import Registry
from harness.plan.engine import EngineClass

BACKENDS: Registry[EngineClass] = Registry("backend", {
    "hf": "backends.hf:HFBackend",
    "accelerate": "backends.accelerate_pp:AccelerateBackend",
    "deepspeed": "backends.deepspeed_tp:DeepSpeedBackend",
    "deepspeed_zero": "backends.deepspeed_zero:ZeroBackend",
    "vllm": "backends.vllm_engine:VLLMBackend",
    "openai": "backends.openai_compat.backend:OpenAIBackend",
    "synthetic": "backends.synthetic:SyntheticBackend",
})

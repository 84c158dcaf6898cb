"""LoRA adapters in vLLM in process (docs/measurement.md, "LoRA adapters"): the entry's `lora` section as engine
arguments, the adapters the harness makes as vLLM's LoRARequests, one per name a request may draw."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict, List

from harness.config.engine import LoraConfig
from harness.model.spec import ModelSpec
from harness.scenarios.adapter_mix import adapter_name

MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # what vLLM's max_lora_rank may be


def engine_args(lora: LoraConfig) -> Dict[str, Any]:
    """Every adapter held at once (max_loras; the entry's engine_args may hold fewer, which makes them swap), at the
    smallest max_lora_rank vLLM takes that fits their rank."""
    return {"enable_lora": True, "max_loras": lora.adapters, "max_cpu_loras": lora.adapters,
            "max_lora_rank": next(r for r in MAX_LORA_RANKS if r >= lora.rank)}


class Adapters:
    """The entry's adapters, made in a folder of their own that lives as long as the engine, as LoRARequests by the
    name a request names (`lora-0`, ...)."""

    def __init__(self, model: ModelSpec, lora: LoraConfig):
        from vllm.lora.request import LoRARequest

        from harness.model.adapters import write_adapters

        self._folder = tempfile.TemporaryDirectory(prefix="bench-vllm-lora-")
        self.load = lora.load
        names = [adapter_name(i) for i in range(lora.adapters)]
        made = write_adapters(model, lora, Path(self._folder.name), names)
        # vLLM's adapter ids start at 1 (0 is the model alone)
        self.requests = {name: LoRARequest(name, i + 1, str(path)) for i, (name, path) in enumerate(made)}

    def at_start(self) -> List[Any]:
        """The LoRARequests the engine loads as it starts (`lora.load: start`); none on demand, where vLLM loads an
        adapter when the first request naming it is scheduled."""
        return list(self.requests.values()) if self.load == "start" else []

    def close(self) -> None:
        self._folder.cleanup()

"""LoRA adapters behind a server the `openai` backend starts (docs/measurement.md, "LoRA adapters"): the adapters
made for the entry's `lora` section, handed to vLLM as --lora-modules words (each request's is drawn by
harness/scenarios/adapter_mix.py's with_adapters)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from harness.config.engine import LoraConfig
from harness.model.spec import ModelSpec
from harness.scenarios.adapter_mix import adapter_name


def made_modules(model: ModelSpec, lora: Optional[LoraConfig], folder: Path, values: Dict[str, str]) -> List[str]:
    """The entry's adapters, made in `folder` (harness/model/adapters.py), as --lora-modules' `name=path` words; their
    count and rank go into `values` as {lora_adapters} and {lora_rank}. [] without a lora section."""
    if lora is None:
        return []
    from harness.model.adapters import write_adapters  # torch: only where adapters are made

    values.update({"{lora_adapters}": str(lora.adapters), "{lora_rank}": str(lora.rank)})
    names = [adapter_name(i) for i in range(lora.adapters)]
    return [f"{name}={path}" for name, path in write_adapters(model, lora, folder, names)]

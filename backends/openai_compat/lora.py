"""LoRA adapters behind a server the `openai` backend starts (docs/measurement.md, "LoRA adapters"): the adapters
made for the entry's `lora` section, handed to vLLM as --lora-modules words (`load: start`) or left in a folder its
LoRA resolver finds each in when a request first names it (`load: on_demand`); each request's is drawn by
harness/scenarios/adapter_mix.py's with_adapters."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional

from harness.config.engine import LoraConfig
from harness.model.spec import ModelSpec
from harness.scenarios.adapter_mix import adapter_name


def made_modules(model: ModelSpec, lora: Optional[LoraConfig], folder: Path, values: Dict[str, str]) -> List[str]:
    """The entry's adapters, made in `folder` (harness/model/adapters.py), as --lora-modules' `name=path` words ([]
    when loaded on demand); their count and rank go into `values` as {lora_adapters} and {lora_rank}. [] without a
    lora section."""
    if lora is None:
        return []
    from harness.model.adapters import write_adapters  # torch: only where adapters are made

    values.update({"{lora_adapters}": str(lora.adapters), "{lora_rank}": str(lora.rank)})
    names = [adapter_name(i) for i in range(lora.adapters)]
    # vLLM's resolver loads an adapter only if its config names the model as the server was started: --model's value
    served = values.get("{model_dir}") or values.get("{checkpoint_dir}") or model.source
    made = write_adapters(model, lora, folder, names, base_model=served)
    return [] if lora.load == "on_demand" else [f"{name}={path}" for name, path in made]


def server_env(lora: Optional[LoraConfig], folder: Path, env: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """The server's environment: with adapters loaded on demand, vLLM's filesystem LoRA resolver (a plugin vLLM
    ships) pointed at the adapters' folder, and runtime adapter loading allowed, which the resolver needs."""
    if lora is None or lora.load != "on_demand":
        return env
    return {**(env if env is not None else os.environ), "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_LORA_RESOLVER_CACHE_DIR": str(folder)}

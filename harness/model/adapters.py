"""LoRA adapters made here for the sweep's model (docs/measurement.md, "LoRA adapters"): random weights in PEFT's
format (adapter_config.json, adapter_model.safetensors), which vLLM, transformers and PEFT load alike.

The model is built on the meta device, so its layers' shapes are read without its weights, whatever its size: an
adapter of a 70B model is written as fast as one of tiny-llama. A is drawn as PEFT's default initialization draws it
(Kaiming-uniform over its inputs); B, which PEFT starts at zero (an adapter that changes nothing), is drawn small
and non-zero, as after training: what an adapter costs a server does not depend on its values, but an adapter that
is a no-op could be skipped by one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from harness.config.engine import LoraConfig
from harness.errors import UserError
from harness.model import weights
from harness.model.spec import ModelSpec

B_STD = 0.01  # B's scale: the adapter moves the layer's output by a small share of it


def lora_layers(model: ModelSpec, lora: LoraConfig, key: str = "lora") -> List[Tuple[str, int, int]]:
    """(module name, in features, out features) of every linear layer `lora.target_modules` names; a UserError
    naming `key`.target_modules where one names none."""
    import torch

    net = weights.build_empty(model.hf_config, model.torch_dtype)
    linear = [(name, m.in_features, m.out_features) for name, m in net.named_modules()
              if isinstance(m, torch.nn.Linear)]
    found = [layer for layer in linear if layer[0].rsplit(".", 1)[-1] in lora.target_modules]
    missing = [t for t in lora.target_modules if not any(n.rsplit(".", 1)[-1] == t for n, _, _ in found)]
    if missing:
        names = ", ".join(dict.fromkeys(n.rsplit(".", 1)[-1] for n, _, _ in linear))
        raise UserError(f"{key}.target_modules: {missing[0]} is no linear layer of {model.label} (its layers: "
                        f"{names})")
    return found


def write_adapters(model: ModelSpec, lora: LoraConfig, folder: Path, names: Sequence[str],
                   base_model: Optional[str] = None) -> List[Tuple[str, Path]]:
    """One adapter per name in `folder`, a sub-folder each named so, each with weights of its own: [(name, path)].
    `base_model`: the model's name as the server was started with it (vLLM's LoRA resolver loads only an adapter
    whose config names it); default the model's source."""
    import torch
    from safetensors.torch import save_file

    layers = lora_layers(model, lora)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model or model.source,
              "r": lora.rank,
              "lora_alpha": 2 * lora.rank, "lora_dropout": 0.0, "target_modules": sorted(lora.target_modules),
              "bias": "none", "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
              "modules_to_save": None, "init_lora_weights": False}
    made = []
    for index, name in enumerate(names):
        generator = torch.Generator().manual_seed(lora.seed * 100_003 + index)
        tensors = {}
        for layer, fan_in, fan_out in layers:
            bound = math.sqrt(1.0 / fan_in)  # kaiming_uniform_(a=sqrt(5)), as PEFT draws A
            a = (torch.rand(lora.rank, fan_in, generator=generator) * 2 - 1) * bound
            b = torch.randn(fan_out, lora.rank, generator=generator) * B_STD
            tensors[f"base_model.model.{layer}.lora_A.weight"] = a.to(model.torch_dtype).contiguous()
            tensors[f"base_model.model.{layer}.lora_B.weight"] = b.to(model.torch_dtype).contiguous()
        path = folder / name
        path.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path / "adapter_model.safetensors"))
        (path / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
        made.append((name, path))
    return made

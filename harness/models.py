"""Resolve the `model` section into a ModelSpec: the architecture, its sizes, where it comes from.

Nothing here loads weights. Parameter counts come from building the model on the
meta device, which is exact for every architecture (MoE included) and allocates nothing.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, FrozenSet, List

from harness.config import ModelConfig, SweepConfig
from harness.errors import UserError, known_names

PRESETS_DIR = Path(__file__).parent / "presets"
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def preset_names() -> List[str]:
    return sorted(p.name for p in PRESETS_DIR.iterdir() if (p / "config.json").is_file())


@dataclass
class ModelSpec:
    """A model as the harness sees it. `hf_config` already carries the YAML's overrides."""

    name: str
    source: str
    weights: str
    dtype: str
    hf_config: Any
    num_params: int

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, TORCH_DTYPES[self.dtype])

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def max_positions(self) -> int:
        return int(self.hf_config.max_position_embeddings)

    @property
    def special_token_ids(self) -> FrozenSet[int]:
        """Token ids a random prompt must avoid: a stray EOS or BOS changes what the model does."""
        ids = set()
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(self.hf_config, key, None)
            ids.update(value if isinstance(value, list) else [value] if value is not None else [])
        return frozenset(ids)

    def write_config_folder(self, folder: Path) -> Path:
        """Write the resolved config.json (overrides applied) for engines that load from a folder."""
        folder.mkdir(parents=True, exist_ok=True)
        self.hf_config.save_pretrained(folder)
        return folder


def resolve_model(config: ModelConfig) -> ModelSpec:
    if config.preset:
        known = preset_names()
        if config.preset not in known:
            raise UserError(f"model.preset: unknown preset {config.preset!r}{known_names(config.preset, known)}")
        source, name = str(PRESETS_DIR / config.preset), config.preset
    else:
        source = name = config.name_or_path
    hf_config = _load_hf_config(source)
    _apply_overrides(hf_config, config.overrides)
    return ModelSpec(name, source, config.weights, config.dtype, hf_config, count_parameters(hf_config))


def check_lengths(config: SweepConfig, model: ModelSpec) -> None:
    """Every input + output must fit the model's positions; name the worst pair if not."""
    longest = max(config.input_lengths) + max(config.output_lengths)
    if longest > model.max_positions:
        raise UserError(
            f"input_lengths/output_lengths: {max(config.input_lengths)} + {max(config.output_lengths)} = {longest} "
            f"tokens exceeds {model.name}'s max_position_embeddings ({model.max_positions})"
        )


def _load_hf_config(source: str):
    from transformers import AutoConfig

    if source.startswith((".", "/", "~")) and not Path(source).expanduser().is_dir():
        raise UserError(f"model.name_or_path: no such folder {source!r}")

    try:
        return AutoConfig.from_pretrained(source)
    except Exception as e:  # transformers raises OSError, ValueError or hub errors here
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"model.name_or_path: cannot load a config from {source!r} ({reason})") from None


def _apply_overrides(hf_config, overrides: dict) -> None:
    for key, value in overrides.items():
        if not hasattr(hf_config, key):
            raise UserError(f"model.overrides.{key}: not a field of {type(hf_config).__name__}")
        setattr(hf_config, key, value)


@functools.lru_cache(maxsize=8)
def _count_parameters(config_json: str) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.for_model(**json.loads(config_json))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def count_parameters(hf_config) -> int:
    return _count_parameters(hf_config.to_json_string(use_diff=False))


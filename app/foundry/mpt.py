"""llm-foundry's `mpt_causal_lm` section -> `preset: mpt-7b` (or mpt-30b) with its architecture fields as overrides,
run by transformers' MptForCausalLM. What that implementation cannot build is refused, not approximated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

from app.foundry.lines import (
    DROPOUT,
    INIT_DEVICE,
    MODEL_USE_CACHE,
    TOKENIZER,
    TRAINING_ONLY,
    WEIGHT_INIT,
    MappingLines,
    choice,
    show,
)
from harness.errors import UserError

MPT_PRESETS = ("mpt-7b", "mpt-30b")  # the first is the default base when the fields match neither
PRESETS_DIR = Path(__file__).resolve().parents[2] / "harness" / "presets"

# MPT architecture fields, with llm-foundry's MPTConfig defaults (transformers' MptConfig has the same): an absent
# field is built at its default there, so it is written out here rather than left to the preset's value.
MPT_ARCH_DEFAULTS = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4, "max_seq_len": 2048,
                     "vocab_size": 50368}
# Other MptConfig fields transformers' MptForCausalLM builds from, under llm-foundry's name -> transformers' name.
MPT_RENAMED = {"norm_eps": "layer_norm_epsilon", "layer_norm_epsilon": "layer_norm_epsilon",
               "tie_word_embeddings": "tie_word_embeddings"}
MPT_ATTN_OVERRIDES = ("softmax_scale", "clip_qkv")  # attn_config fields MptAttention reads
# transformers' MptMLP is up_proj to 4 x d_model, whatever expansion_ratio says.
MPT_EXPANSION_RATIO = 4

MPT_DROPPED = {
    "init_device": INIT_DEVICE,
    "init_std": WEIGHT_INIT, "init_config": WEIGHT_INIT, "initializer_range": WEIGHT_INIT,
    "resid_pdrop": DROPOUT, "emb_pdrop": DROPOUT, "attn_pdrop": DROPOUT,  # attn_pdrop: where 1b.yaml puts it
    "embedding_fraction": "scales embedding gradients, in training only",
    "use_cache": MODEL_USE_CACHE,
    "tokenizer_name": TOKENIZER, "loss_fn": TRAINING_ONLY, "verbose": "logging only",
    # MPT-7B's own config.json says true next to alibi: true; transformers' MPT builds no such table either way
    "learned_pos_emb": "transformers' MPT has no learned position embeddings (ALiBi positions only)",
}
# MptConfig fields transformers' model has exactly one way of building: accepted at that value only.
MPT_FIXED = {
    "no_bias": (True, "transformers' MPT layers have no biases"),
    "logit_scale": (None, "transformers' MPT does not scale its logits"),
}
MPT_ATTN_DROPPED = {
    "attn_pdrop": DROPOUT,
    "attn_uses_sequence_id": "masks packed training sequences; inference batches carry no sequence ids",
    "kv_n_heads": "used by grouped-query attention only, and attn_type is multi-head here",
}
MPT_ATTN_FIXED = {
    "attn_type": ("multihead_attention", "transformers' MptAttention is multi-head only"),
    "alibi": (True, "transformers' MPT always applies ALiBi"),
    "alibi_bias_max": (8, "transformers' MPT builds ALiBi with alibi_bias_max 8"),
    "qk_ln": (False, "transformers' MPT has no query/key LayerNorm"),
    "prefix_lm": (False, "transformers' MPT is causal only"),
    "rope": (False, "transformers' MPT uses ALiBi, not rotary embeddings"),
    "sliding_window_size": (-1, "transformers' MPT attends over the whole sequence"),
    "fused_qkv": (True, "transformers' MPT has one fused Wqkv projection"),
}
ATTN_IMPLS = ("torch", "triton", "flash")
NORM_TYPES = ("low_precision_layernorm", "layernorm")


def mpt_model(section: dict, lines: MappingLines) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    overrides: Dict[str, Any] = {}
    first_line = len(lines)  # the model's own line goes first, once the preset is chosen
    _ffn_config(section, lines)
    for key, default in MPT_ARCH_DEFAULTS.items():
        if key in section:
            overrides[key] = section.pop(key)
            lines.mapped(f"model.{key}", overrides[key], f"model.overrides.{key}")
        else:
            overrides[key] = default
            lines.append(f"model.{key}: absent -> model.overrides.{key}: {default} (llm-foundry's MPTConfig default)")
    if overrides["expansion_ratio"] != MPT_EXPANSION_RATIO:
        raise UserError(f"model.expansion_ratio: {overrides['expansion_ratio']} cannot be built: transformers' MPT "
                        f"MLP is always {MPT_EXPANSION_RATIO} x d_model (allowed: {MPT_EXPANSION_RATIO})")
    entry = _attn_config(section.pop("attn_config", None) or {}, overrides, lines)
    for key in list(section):
        value = section.pop(key)
        path = f"model.{key}"
        if lines.known(path, key, value, MPT_DROPPED, MPT_FIXED):
            continue
        if key in MPT_RENAMED:
            overrides[MPT_RENAMED[key]] = value
            lines.mapped(path, value, f"model.overrides.{MPT_RENAMED[key]}")
        elif key == "norm_type":
            choice(path, value, NORM_TYPES, "transformers' MPT uses LayerNorm; the low-precision variant differs "
                    "only under training's autocast", lines)
        elif key == "fc_type":
            fc = value.get("name") if isinstance(value, dict) else value
            choice(path, fc, ("torch",), "plain torch Linear layers, what transformers' MPT has", lines)
        else:
            raise UserError(f"{path}: not a field transformers' MptConfig builds (llm-foundry-only MPT option); "
                            "remove it to run transformers' MPT")
    preset = _closest_mpt_preset(overrides)
    lines.insert(first_line, f"model.name: mpt_causal_lm -> model.preset: {preset}, weights: random (transformers' "
                 "MptForCausalLM, ALiBi positions, with the fields below as overrides; random weights, as "
                 "llm-foundry's benchmark builds them)")
    return {"preset": preset, "weights": "random", "overrides": overrides}, entry


def _ffn_config(section: dict, lines: MappingLines) -> None:
    """ffn_config: llm-foundry's MLP choice; only its plain MLP exists in transformers' MPT. An expansion_ratio set
    there (as in llm-foundry's 7b.yaml) is the model's expansion_ratio."""
    ffn = dict(section.pop("ffn_config", None) or {})
    if "expansion_ratio" in ffn:
        ratio = ffn.pop("expansion_ratio")
        if section.get("expansion_ratio", ratio) != ratio:
            raise UserError(f"model.ffn_config.expansion_ratio: {ratio} disagrees with model.expansion_ratio "
                            f"({section['expansion_ratio']}); set one")
        section["expansion_ratio"] = ratio
        lines.append(f"model.ffn_config.expansion_ratio: {ratio} -> model.expansion_ratio (below)")
    for key, value in ffn.items():
        if key != "ffn_type":
            raise UserError(f"model.ffn_config.{key}: not an option of transformers' MPT MLP (allowed: ffn_type: "
                            "mptmlp, expansion_ratio)")
        choice("model.ffn_config.ffn_type", value, ("mptmlp",), "transformers' MptMLP is that MLP", lines)


def _attn_config(attn: Any, overrides: Dict[str, Any], lines: MappingLines) -> Dict[str, Any]:
    """attn_config -> overrides.attn_config (the fields MptAttention reads) and the entry's attn_implementation."""
    if not isinstance(attn, dict):
        raise UserError(f"model.attn_config: expected a mapping, got {show(attn)}")
    attn = dict(attn)
    impl = attn.pop("attn_impl", "absent")
    if impl not in (*ATTN_IMPLS, "absent"):
        raise UserError(f"model.attn_config.attn_impl: {impl!r} is not one of {', '.join(ATTN_IMPLS)}")
    lines.mapped("model.attn_config.attn_impl", impl, "backends[0].attn_implementation", "eager",
                 "transformers' MPT has eager attention only, with ALiBi; llm-foundry's triton/flash kernels are its "
                 "own MPT code's")
    for key, value in attn.items():
        path = f"model.attn_config.{key}"
        if key in MPT_ATTN_OVERRIDES:
            overrides.setdefault("attn_config", {})[key] = value
            lines.mapped(path, value, f"model.overrides.attn_config.{key}")
        elif not lines.known(path, key, value, MPT_ATTN_DROPPED, MPT_ATTN_FIXED):
            raise UserError(f"{path}: not a field transformers' MPT attention builds (llm-foundry-only option); "
                            "remove it to run transformers' MPT")
    return {"attn_implementation": "eager"}


def _closest_mpt_preset(overrides: Dict[str, Any]) -> str:
    """The MPT preset sharing the most architecture fields, so that the `model` column lists the fewest changes."""
    def differing(preset: str) -> int:
        path = PRESETS_DIR / preset / "config.json"
        if not path.is_file():
            return len(MPT_ARCH_DEFAULTS) + 1
        fields = json.loads(path.read_text())
        return sum(fields.get(k) != overrides[k] for k in MPT_ARCH_DEFAULTS)

    return min(MPT_PRESETS, key=differing)  # min keeps the first of equals: mpt-7b

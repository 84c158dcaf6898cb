"""A model folder's config.json checked as it is read, before anything is planned from it.

What sizes a model (its widths, heads, layers, vocabulary, positions, experts) must be stated, of the right type and
in range: a field missing from a family this harness knows (harness/model/families.py) is refused, with "did you
mean" for a misspelt one, instead of planning the model with transformers' default (a Llama config without
`hidden_size` is 4096 wide there: 371 M parameters planned for an 8.6 M model). The same checks hold for
`model.overrides`. Families this harness does not count are left to transformers, their sizes still type-checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, Mapping

from harness.errors import UserError, did_you_mean
from harness.fields import is_int
from harness.files import load_json, read_utf8
from harness.model.config_json import MOE_FIELDS, PLANNED, ConfigView, missing_planned
from harness.model.families import FAMILIES

# Every name a family gives a sizing field (planning's own, and each family's alias for it): a whole number >= 1.
SIZES = frozenset(PLANNED) | {own for f in FAMILIES.values() for name, own in f.aliases.items() if name in PLANNED}
# A mixture of experts' counts and widths, under planning's names and each family's: whole numbers >= 0 (a dense
# variant of a family may state 0 experts).
EXPERT_SIZES = frozenset(MOE_FIELDS) | {own for f in FAMILIES.values() for name, own in f.aliases.items()
                                        if name in MOE_FIELDS} | {"n_shared_experts", "kv_lora_rank",
                                                                  "qk_rope_head_dim", "qk_nope_head_dim",
                                                                  "v_head_dim", "q_lora_rank"}


def read_config_json(folder: str, key: str) -> Dict[str, Any]:
    """The fields of `folder`/config.json, checked (`check_config`); UserError naming the file otherwise."""
    path = Path(folder).expanduser() / "config.json"
    if not path.is_file():
        raise UserError(f"{key}.name_or_path: {folder} has no config.json (a model folder holds the one "
                        "save_pretrained writes)")
    fields = load_json(read_utf8(path, "config.json"), str(path))  # a key given twice is refused
    if not isinstance(fields, dict):
        raise UserError(f"{path}: expected a JSON object of config fields, got a {type(fields).__name__}")
    check_config(fields, str(path))
    return fields


def check_config(fields: Mapping[str, Any], where: str) -> None:
    """Sizes of the right type and range; for a family this harness counts, every sizing field stated."""
    model_type = fields.get("model_type")
    if model_type is None or model_type == "":
        raise UserError(f"{where}: no model_type (e.g. \"llama\"): transformers picks the model's class by it")
    if not isinstance(model_type, str):
        raise UserError(f"{where}: model_type: must be a family's name as text (e.g. \"llama\"), got "
                        f"{json.dumps(model_type)}")
    check_sizes(fields, lambda name: f"{where}: {name}")
    _check_shapes(fields, where)
    text = fields.get("text_config")
    if isinstance(text, Mapping):  # a multimodal wrapper: its language model's sizes
        check_sizes(text, lambda name: f"{where}: text_config.{name}")
    family = FAMILIES.get(model_type)
    if family is None:
        return
    _check_flags(fields, family, where)
    missing = missing_planned(ConfigView({**family.defaults, **{k: v for k, v in fields.items() if v is not None}}))
    if missing is not None:
        own = family.aliases.get(missing, missing)
        given = f"{own}: null" if own in fields else f"no {own}"
        hint = "" if own in fields else did_you_mean(own, [str(k) for k in fields])
        raise UserError(f"{where}: {given} (model_type {model_type} is sized by it; planning will not guess it){hint}")
    heads, kv_heads = _given(fields, family, "num_attention_heads"), _given(fields, family, "num_key_value_heads")
    if heads and kv_heads and heads % kv_heads:
        raise UserError(f"{where}: {family.aliases.get('num_attention_heads', 'num_attention_heads')} ({heads}) is "
                        f"not a multiple of num_key_value_heads ({kv_heads}): each KV head serves a whole group")


# The most any sizing field may be, under planning's name: well past every model published (a 256K vocabulary, 160
# layers, 10M positions), and short of what planning could not build even on the meta device (a billion-token
# vocabulary takes this machine's memory, 100,000 layers minutes).
MOST = {"vocab_size": 2**24, "num_hidden_layers": 2**10, "num_attention_heads": 2**14, "num_key_value_heads": 2**14,
        "max_position_embeddings": 2**30}
MOST_OTHERWISE = 2**20  # widths, head sizes, expert counts


def check_sizes(fields: Mapping[str, Any], name_of: Callable[[str], str]) -> None:
    """Each sizing field `fields` states (not null) a whole number in range; UserError at `name_of(field)`."""
    for name, value in fields.items():
        if value is None or (name not in SIZES and name not in EXPERT_SIZES):
            continue
        least, most = 1 if name in SIZES else 0, MOST.get(_planning_name(name), MOST_OTHERWISE)
        if not is_int(value) or not least <= value <= most:
            raise UserError(f"{name_of(name)}: must be a whole number in [{least}, {most}], got {value!r}")


def _planning_name(name: str) -> str:
    """Planning's name for a family's own (`n_layer` is num_hidden_layers)."""
    return next((planned for f in FAMILIES.values() for planned, own in f.aliases.items() if own == name), name)


# Normalization epsilons: a positive number (a zero or negative one divides by nothing, or by less).
EPSILONS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon")
TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def _check_shapes(fields: Mapping[str, Any], where: str) -> None:
    """Fields whose wrong value builds a model that cannot run: an epsilon not above 0, a rope section not a
    mapping."""
    for name in EPSILONS:
        value = fields.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise UserError(f"{where}: {name}: must be a number > 0, got {json.dumps(value)}")
    for name in ("rope_scaling", "rope_parameters"):
        value = fields.get(name)
        if value is not None and not isinstance(value, dict):
            raise UserError(f"{where}: {name}: must be a mapping (e.g. {{\"rope_type\": \"linear\", \"factor\": 2.0}}) "
                            f"or null, got {json.dumps(value)}")


def check_token_ids(fields: Mapping[str, Any], where: str) -> None:
    """Special token ids, where a user changes them or the vocabulary (model.overrides), are ids of the vocabulary:
    0 to vocab_size - 1 (a config.json's own are the model's, as published)."""
    vocab: int = fields["vocab_size"] if is_int(fields.get("vocab_size")) else 2**63
    for name in TOKEN_IDS:
        value = fields.get(name)
        ids: list = value if isinstance(value, list) else [value]
        if value is not None and not all(is_int(i) and 0 <= i < vocab for i in ids):
            raise UserError(f"{where}: {name} {json.dumps(value)} is not a token id of the vocabulary (0 to "
                            f"{vocab - 1}, or a list of them)")


def _check_flags(fields: Mapping[str, Any], family: Any, where: str) -> None:
    """The flags that shape what the family builds (tied embeddings, biases) are true or false, not text."""
    flags = {"tie_word_embeddings", *family.bias_flags, *family.mlp_bias_flags,
             *(k for k, v in family.defaults.items() if isinstance(v, bool))}
    for name in sorted(flags):
        value = fields.get(name)
        if value is not None and not isinstance(value, bool):
            raise UserError(f"{where}: {name}: must be true or false, got {json.dumps(value)}")


def _given(fields: Mapping[str, Any], family: Any, name: str) -> Any:
    return fields.get(family.aliases.get(name, name))

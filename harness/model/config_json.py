"""A model's config.json read without transformers (and so without torch): what planning needs, in milliseconds.

`--plan` and `--dry-run` only need a model's sizes. Importing transformers' config classes imports torch
(about 3 s of a 5 s budget on a small host); counting parameters by building the model on the meta device
costs more. For the families of harness/model/families.py (`FAMILIES`: Llama 3, Llama 4 text, Mistral,
Mixtral, Qwen2/2.5, Qwen2-MoE, Qwen3-MoE, MPT, Phi-3, Gemma 2, Gemma 3 text, DeepSeek V2/V3, GPT-2, GPT-J,
GPT-NeoX, OPT, BLOOM, Falcon), both come from config.json here; tests/test_config_json.py and
tests/test_model_families.py hold every field and count against transformers' own and against the model cards.
Anything else (another family, a multimodal wrapper, a hub id, overrides) goes through transformers, as engines do.

This is also the one place that knows how families differ in naming what planning reads. Every view, read here
or made from transformers' config (harness/model/spec.py, `view_of`), answers under one set of names: Llama's
(`hidden_size`, `num_attention_heads`, `num_key_value_heads`, `head_dim`, `intermediate_size`,
`num_hidden_layers`, `vocab_size`, `max_position_embeddings`: absent for ALiBi models, which have no limit) and,
for a mixture of experts, `num_local_experts` (experts per MoE layer), `num_experts_per_tok`,
`moe_intermediate_size` (one expert's width), `shared_expert_intermediate_size` (the always-on shared expert's
width, DeepSeek's n_shared_experts x moe_intermediate_size) and `num_moe_layers` (layers with experts; the others
have a dense MLP `intermediate_size` wide). Multi-head latent attention keeps DeepSeek's own names
(`kv_lora_rank`, `qk_rope_head_dim`, `qk_nope_head_dim`, `v_head_dim`, `q_lora_rank`). Readers (memory,
roofline, planner, backends) use those names and never test a family; what the KV cache holds per token is
families.py's `kv_layout`, for every reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from harness.model.families import FAMILIES, Family, count_parameters, family_of

__all__ = ["FAMILIES", "Family", "count_parameters"]  # re-exported: callers count through this module


# Fields a config.json must carry to be read here (by planning's names); without one, transformers' default
# decides (slow path).
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "max_position_embeddings", "tie_word_embeddings")
# What planning reads of every model (the names of this module's docstring): a config without one of them cannot
# be sized, whatever its family.
PLANNED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "num_key_value_heads", "head_dim", "max_position_embeddings")
# What planning reads of a mixture of experts (the names of this module's docstring).
MOE_FIELDS = ("num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "num_moe_layers",
              "shared_expert_intermediate_size")
# Fields a family's config class accepts but its transformers model does not build from: it builds the value here
# whatever the config says. Another value would be planned, labelled and reported as a model nobody measured.
NOT_BUILT = {
    "mpt": {
        "expansion_ratio": (4, "MptMLP is 4 x d_model wide whatever expansion_ratio says"),
        "no_bias": (True, "its linear layers have no biases whatever no_bias says"),
        "attn_config.attn_type": ("multihead_attention", "it builds multi-head attention only"),
        "attn_config.alibi": (True, "it always adds ALiBi and has no position embedding to use instead"),
        "attn_config.qk_ln": (False, "it has no query/key LayerNorm"),
    },
}
# Families whose transformers model computes attention itself (MPT adds ALiBi to the score matrix), with no
# SDPA, flash or flex kernel: transformers refuses any attn_implementation but eager for them.
EAGER_ATTENTION_ONLY = {"mpt": "MptForCausalLM"}


def standard_fields(fields: Mapping[str, Any], mapped: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Planning's names for what `fields` hold under their family's own names, and what planning derives: head_dim
    (hidden / heads), num_key_value_heads (the query heads: plain MHA), the MLP width (MPT's expansion_ratio,
    GPT-2's and BLOOM's 4 x hidden), the family's own (Falcon's KV heads, DeepSeek's MoE layers), a MoE's expert
    width and MoE layer count. `mapped`: values transformers' config class resolves through its attribute_map (slow
    path). A field the config itself sets (not null) always wins."""
    family = family_of(fields)
    given = {k: v for k, v in fields.items() if v is not None}
    out: Dict[str, Any] = {}
    for name, own in family.aliases.items():
        if name not in given and given.get(own) is not None:
            out[name] = given[own]
    for name, value in (mapped or {}).items():
        if name not in given and value is not None:
            out.setdefault(name, value)
    f = {**given, **out}

    def derive(name: str, value: Any) -> None:
        if name not in f and value is not None:
            out[name] = f[name] = value

    for name, value in (family.derive(f) if family.derive else {}).items():
        derive(name, value)
    if "expansion_ratio" in f and "hidden_size" in f:
        derive("intermediate_size", f["expansion_ratio"] * f["hidden_size"])
    if family.mlp_ratio and "hidden_size" in f:
        derive("intermediate_size", family.mlp_ratio * f["hidden_size"])
    if f.get("num_attention_heads") and "hidden_size" in f:
        derive("head_dim", f["hidden_size"] // f["num_attention_heads"])
    derive("num_key_value_heads", f.get("num_attention_heads"))
    if f.get("num_local_experts"):
        derive("moe_intermediate_size", f.get("intermediate_size"))  # Mixtral: experts as wide as a dense MLP
        if "num_hidden_layers" in f:
            dense = set(f.get("mlp_only_layers") or ())
            step = f.get("decoder_sparse_step") or 1
            derive("num_moe_layers", sum(1 for i in range(f["num_hidden_layers"])
                                         if i not in dense and (i + 1) % step == 0))
    text = f.get("text_config")
    if isinstance(text, Mapping):  # a multimodal wrapper (Gemma 3, LLaVA) answers for its language model
        for name, value in {**text, **standard_fields(text)}.items():
            if name in PLANNED + MOE_FIELDS:
                derive(name, value)
    return out


class ConfigView:
    """Read-only attributes over a config dict, answering under planning's names too (`standard_fields`).
    `to_dict` gives the config's own fields only, as given."""

    def __init__(self, fields: Mapping[str, Any], mapped: Optional[Mapping[str, Any]] = None):
        self._fields = dict(fields)
        self._standard = standard_fields(self._fields, mapped)

    def __getattr__(self, name: str) -> Any:
        fields, standard = self.__dict__.get("_fields"), self.__dict__.get("_standard")
        if fields is None or standard is None:  # copy/pickle probing a bare instance (both are set together)
            raise AttributeError(name)
        value = fields.get(name)
        if value is None and name in standard:
            return standard[name]
        if name not in fields:
            raise AttributeError(name)
        return ConfigView(value) if isinstance(value, dict) else value

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._fields)

    def __eq__(self, other) -> bool:
        return isinstance(other, ConfigView) and (self._fields, self._standard) == (other._fields, other._standard)

    def __repr__(self) -> str:
        return f"ConfigView({self._fields.get('model_type')}, {len(self._fields)} fields)"

    def __getstate__(self):
        return {"fields": self._fields, "standard": self._standard}

    def __setstate__(self, state):
        self.__dict__["_fields"], self.__dict__["_standard"] = state["fields"], state["standard"]


def read_local(source: str) -> Optional[ConfigView]:
    """The view of `source`'s config.json when it is a local folder of a family counted here; None otherwise."""
    path = Path(source).expanduser() / "config.json"
    if not path.is_file():
        return None
    try:
        fields = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # transformers says what is wrong with it
    family = FAMILIES.get(fields.get("model_type", "")) if isinstance(fields, dict) else None
    if family is None or any(name not in fields for name in family.stated):
        return None
    own = {k: v for k, v in fields.items() if v is not None or k not in family.defaults}  # null: the default
    view = ConfigView({**family.defaults, **own})
    required = [key for key in REQUIRED + family.required if not (family.alibi and key == "max_position_embeddings")]
    if any(getattr(view, key, None) is None for key in required):
        return None
    if any(getattr(view, key, value) != value for key, value in family.fast_if.items()):
        return None  # a variant counted by building it (OPT-350m's post-norm layers, say)
    if not_built(view.to_dict()):
        return None  # transformers' path refuses it with the reason
    return view


def not_built(fields: Mapping[str, Any]) -> Optional[Tuple[str, Any, Any, str]]:
    """(field path, value, what transformers builds, why) for the first field of `fields` its family's
    transformers model does not build as stated (NOT_BUILT); None when it builds every field as stated."""
    for path, (built, why) in NOT_BUILT.get(fields.get("model_type", ""), {}).items():
        value: Any = fields
        for key in path.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None and value != built:
            return path, value, built, why
    return None


def missing_planned(c: ConfigView) -> Optional[str]:
    """The first field planning reads (PLANNED) that `c` (its text_config, for a multimodal model) lacks under
    planning's names, or None."""
    text = getattr(c, "text_config", None) or c
    unbounded = family_of(text).alibi  # ALiBi: no position table, so no limit to state
    return next((name for name in PLANNED if getattr(text, name, None) is None
                 and not (unbounded and name == "max_position_embeddings")), None)


def eager_attention_only(c: ConfigView) -> Optional[str]:
    """The transformers class of a model that runs eager attention only, or None."""
    return EAGER_ATTENTION_ONLY.get(getattr(c, "model_type", ""))


def eager_score_copies(c: ConfigView) -> int:
    """How many fp32-sized score matrices an eager-attention prefill holds at once (Family.eager_score_copies)."""
    return family_of(c).eager_score_copies

"""A model's config.json read without transformers (and so without torch): what planning needs, in milliseconds.

`--plan` and `--dry-run` only need a model's sizes. Importing transformers' config classes imports torch
(about 3 s of a 5 s budget on a small host); counting parameters by building the model on the meta device
costs more. For the families below, both come from config.json here; tests/test_config_json.py holds every
field and count against transformers' own for each preset and for variants (GQA, biases, tied, MoE).
Anything else (another family, a hub id, overrides) goes through transformers, as engines do.

This is also the one place that knows how families differ in naming what planning reads. Every view, read here
or made from transformers' config (harness/model/spec.py, `view_of`), answers under one set of names: Llama's
(`hidden_size`, `num_attention_heads`, `num_key_value_heads`, `head_dim`, `intermediate_size`,
`num_hidden_layers`, `vocab_size`, `max_position_embeddings`) and, for a mixture of experts,
`num_local_experts` (experts per MoE layer), `num_experts_per_tok`, `moe_intermediate_size` (one expert's width)
and `num_moe_layers` (layers with experts; the others have a dense MLP `intermediate_size` wide). Readers
(memory, roofline, planner, backends) use those names and never test a family.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple


@dataclass(frozen=True)
class Family:
    """What a family's CausalLM builds, as far as sizes go, and how its config names the fields planning reads."""

    # A flag absent from config.json means what the family's config class defaults it to.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Planning's name -> the family's own, where they differ. transformers' attribute_map holds the same for the
    # fields it maps (tests hold each table to it); max_seq_len it does not map, nor what has no counterpart.
    aliases: Mapping[str, str] = field(default_factory=dict)
    required: Tuple[str, ...] = ()  # beyond REQUIRED, by planning's names
    mlp_matrices: int = 3  # gate, up, down (SwiGLU); MPT's GELU MLP has up and down only
    qkv_bias: bool = False  # biases on q, k and v whatever attention_bias says (Qwen2); o_proj has none
    qk_norm: bool = False  # an RMSNorm over head_dim on queries and on keys, per layer (Qwen3)
    # fp32-sized copies of a layer's [batch, heads, input, input] scores live at once in an eager-attention prefill.
    # MPT's attention keeps the scaled scores, their sum with ALiBi, the masked sum and the fp32 softmax: 3.0 measured
    # (peak RSS on a CPU, batch 4 x input 1024, fp32 and bf16). Llama's eager path measured 2.0 to 2.5 there; left
    # at the 1 the estimate has always used until that is decided for every family.
    eager_score_copies: int = 1


MPT_ALIASES = {"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers",
               "max_position_embeddings": "max_seq_len"}
FAMILIES = {
    "llama": Family(defaults={"attention_bias": False, "mlp_bias": False}),
    "mistral": Family(),
    "mixtral": Family(required=("num_local_experts", "num_experts_per_tok")),
    "qwen2": Family(qkv_bias=True),
    "qwen3_moe": Family(defaults={"attention_bias": False, "mlp_only_layers": [], "decoder_sparse_step": 1},
                        aliases={"num_local_experts": "num_experts"}, qk_norm=True,
                        required=("num_local_experts", "num_experts_per_tok", "moe_intermediate_size")),
    "mpt": Family(defaults={"tie_word_embeddings": True, "expansion_ratio": 4}, aliases=MPT_ALIASES, mlp_matrices=2,
                  eager_score_copies=3),
}
# Fields a config.json must carry to be read here (by planning's names); without one, transformers' default
# decides (slow path).
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "max_position_embeddings", "tie_word_embeddings")
# What planning reads of every model (the names of this module's docstring): a config without one of them cannot
# be sized, whatever its family.
PLANNED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "num_key_value_heads", "head_dim", "max_position_embeddings")
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
    (hidden / heads), num_key_value_heads (the query heads: plain MHA), an MPT's MLP width (expansion_ratio x
    d_model), a MoE's expert width and MoE layer count. `mapped`: values transformers' config class resolves
    through its attribute_map (slow path). A field the config itself sets (not null) always wins."""
    family = FAMILIES.get(fields.get("model_type", ""), Family())  # "": no model_type, no family
    given = {k: v for k, v in fields.items() if v is not None}
    out: Dict[str, Any] = {}
    for name, own in family.aliases.items():
        if name not in given and given.get(own) is not None:
            out[name] = given[own]
    for name, value in (mapped or {}).items():
        if name not in given and value is not None:
            out.setdefault(name, value)
    f = {**given, **out}
    if "intermediate_size" not in f and "expansion_ratio" in f and "hidden_size" in f:
        out["intermediate_size"] = f["intermediate_size"] = f["expansion_ratio"] * f["hidden_size"]
    if "head_dim" not in f and f.get("num_attention_heads") and "hidden_size" in f:
        out["head_dim"] = f["hidden_size"] // f["num_attention_heads"]
    if "num_key_value_heads" not in f and "num_attention_heads" in f:
        out["num_key_value_heads"] = f["num_attention_heads"]
    if f.get("num_local_experts"):
        if "moe_intermediate_size" not in f and "intermediate_size" in f:  # Mixtral: experts as wide as a dense MLP
            out["moe_intermediate_size"] = f["intermediate_size"]
        if "num_moe_layers" not in f and "num_hidden_layers" in f:
            dense = set(f.get("mlp_only_layers") or ())
            step = f.get("decoder_sparse_step") or 1
            out["num_moe_layers"] = sum(1 for i in range(f["num_hidden_layers"])
                                        if i not in dense and (i + 1) % step == 0)
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
    if family is None:
        return None
    own = {k: v for k, v in fields.items() if v is not None or k not in family.defaults}  # null: the default
    view = ConfigView({**family.defaults, **own})
    if any(getattr(view, key, None) is None for key in REQUIRED + family.required):
        return None
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
    return next((name for name in PLANNED if getattr(text, name, None) is None), None)


def eager_attention_only(c: ConfigView) -> Optional[str]:
    """The transformers class of a model that runs eager attention only, or None."""
    return EAGER_ATTENTION_ONLY.get(getattr(c, "model_type", ""))


def eager_score_copies(c: ConfigView) -> int:
    """How many fp32-sized score matrices an eager-attention prefill holds at once (Family.eager_score_copies)."""
    return FAMILIES.get(getattr(c, "model_type", ""), Family()).eager_score_copies


def count_parameters(c: ConfigView) -> int:
    """Every parameter of the family's CausalLM: embeddings, attention (biases where set, q/k norms), the MLP or
    the experts and their router (dense MLPs on layers without experts), two norms per layer, the final norm, and
    the head unless tied. Norms count their weight only: MPT's LayerNorms have no bias."""
    family = FAMILIES[c.model_type]
    hidden, vocab, layers = c.hidden_size, c.vocab_size, c.num_hidden_layers
    q_width, kv_width = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    attention = hidden * (q_width + 2 * kv_width) + q_width * hidden
    if family.qkv_bias:
        attention += q_width + 2 * kv_width
    elif getattr(c, "attention_bias", False):
        attention += q_width + 2 * kv_width + hidden
    if family.qk_norm:
        attention += 2 * c.head_dim

    def mlp(width: int) -> int:
        bias = 2 * width + hidden if getattr(c, "mlp_bias", False) else 0
        return family.mlp_matrices * hidden * width + bias

    moe_layers = getattr(c, "num_moe_layers", None) or 0
    experts = (c.num_local_experts * mlp(c.moe_intermediate_size) + hidden * c.num_local_experts  # and the router
               if moe_layers else 0)
    body = layers * (attention + 2 * hidden) + moe_layers * experts + (layers - moe_layers) * mlp(c.intermediate_size)
    head = 0 if c.tie_word_embeddings else vocab * hidden
    return vocab * hidden + body + hidden + head

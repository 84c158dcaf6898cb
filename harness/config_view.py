"""A model's config.json read without transformers (and so without torch): what planning needs, in milliseconds.

`--plan` and `--dry-run` only need a model's sizes. Importing transformers' config classes imports torch
(about 3 s of a 5 s budget on a small host); counting parameters by building the model on the meta device
costs more. For the families below, both come from config.json here; tests/test_config_view.py holds every
field and count against transformers' own for each preset and for variants (GQA, biases, tied, MoE).
Anything else (another family, a hub id, overrides) goes through transformers, as engines do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

# Families counted here. A flag absent from config.json means what the family's config class defaults it to.
FLAG_DEFAULTS = {
    "llama": {"attention_bias": False, "mlp_bias": False},
    "mistral": {},
    "mixtral": {},
}
# Fields a config.json must carry to be read here; without one, transformers' default decides (slow path).
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "max_position_embeddings", "tie_word_embeddings")
MOE_REQUIRED = ("num_local_experts", "num_experts_per_tok")


class ConfigView:
    """Read-only attributes over a config dict, with the two fields every engine derives the same way:
    head_dim (hidden / heads when absent or null) and num_key_value_heads (the query heads: plain MHA)."""

    def __init__(self, fields: Dict[str, Any]):
        self._fields = dict(fields)

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__["_fields"]
        value = fields.get(name)
        if value is None and name == "head_dim" and fields.get("num_attention_heads"):
            return fields["hidden_size"] // fields["num_attention_heads"]
        if value is None and name == "num_key_value_heads" and "num_attention_heads" in fields:
            return fields["num_attention_heads"]
        if name not in fields:
            raise AttributeError(name)
        return ConfigView(value) if isinstance(value, dict) else value

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._fields)

    def __eq__(self, other) -> bool:
        return isinstance(other, ConfigView) and self._fields == other._fields

    def __repr__(self) -> str:
        return f"ConfigView({self._fields.get('model_type')}, {len(self._fields)} fields)"

    def __getstate__(self):
        return self._fields

    def __setstate__(self, state):
        self.__dict__["_fields"] = state


def read_local(source: str) -> Optional[ConfigView]:
    """The view of `source`'s config.json when it is a local folder of a family counted here; None otherwise."""
    path = Path(source).expanduser() / "config.json"
    if not path.is_file():
        return None
    try:
        fields = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # transformers says what is wrong with it
    family = fields.get("model_type")
    if family not in FLAG_DEFAULTS:
        return None
    required = REQUIRED + (MOE_REQUIRED if family == "mixtral" else ())
    if any(fields.get(key) is None for key in required):
        return None
    return ConfigView({**FLAG_DEFAULTS[family], **fields})


def count_parameters(c: ConfigView) -> int:
    """Every parameter of the family's CausalLM: embeddings, attention (biases where set), the MLP or the
    experts and their router, two norms per layer, the final norm, and the head unless tied."""
    hidden, vocab = c.hidden_size, c.vocab_size
    q_width, kv_width = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    attention = hidden * (q_width + 2 * kv_width) + q_width * hidden
    if getattr(c, "attention_bias", False):
        attention += q_width + 2 * kv_width + hidden
    mlp = 3 * hidden * c.intermediate_size + (2 * c.intermediate_size + hidden if getattr(c, "mlp_bias", False)
                                                 else 0)
    if c.model_type == "mixtral":
        mlp = c.num_local_experts * mlp + hidden * c.num_local_experts  # experts and the router
    layer = attention + mlp + 2 * hidden
    head = 0 if c.tie_word_embeddings else vocab * hidden
    return vocab * hidden + c.num_hidden_layers * layer + hidden + head

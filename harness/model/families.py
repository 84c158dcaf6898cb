"""The families harness/model/config_json.py reads without transformers: how each names what planning reads, what its
CausalLM builds (`count_parameters`), and how its KV cache grows (`kv_layout`).

`kv_layout` is the one place that decides a model's KV-cache bytes per token: the memory estimate
(harness/model/memory.py, capacity in --plan) and the roofline (harness/model/roofline.py, KV traffic) both read it,
so the two can never disagree on how big a token's keys and values are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

Fields = Dict[str, Any]


@dataclass(frozen=True)
class Family:
    """What a family's CausalLM builds, as far as sizes go, and how its config names the fields planning reads."""

    # A flag absent from config.json means what the family's config class defaults it to.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Planning's name -> the family's own, where they differ. transformers' attribute_map holds the same for the
    # fields it maps (tests hold each table to it); max_seq_len it does not map, nor what has no counterpart.
    aliases: Mapping[str, str] = field(default_factory=dict)
    required: Tuple[str, ...] = ()  # beyond config_json.REQUIRED, by planning's names
    # Fields config.json must state, even as null: absent, the config class's default decides (transformers' path),
    # and there null and absent differ (MistralConfig: no sliding_window is 4096; null is none).
    stated: Tuple[str, ...] = ()
    fast_if: Mapping[str, Any] = field(default_factory=dict)  # values counted here; any other: transformers' path
    mlp_matrices: int = 3  # gate, up, down (SwiGLU; Phi-3 fuses gate and up, same count); GELU/ReLU MLPs: 2
    mlp_ratio: int = 0  # width = ratio x hidden where config.json states none (BLOOM builds 4 x hidden always)
    qkv_bias: bool = False  # biases on q, k and v whatever any flag says (Qwen2, GPT-2, BLOOM)
    o_bias: bool = False  # a bias on the output projection whatever any flag says
    mlp_bias: bool = False  # biases on every MLP matrix whatever any flag says
    bias_flags: Tuple[str, ...] = ("attention_bias",)  # config flags that add biases to q, k, v and o
    mlp_bias_flags: Tuple[str, ...] = ("mlp_bias",)  # config flags that add biases to the MLP
    head_bias: bool = False  # GPT-J's lm_head has one
    qk_norm: bool = False  # a norm over head_dim on queries and on keys, per layer (Qwen3, Gemma 3)
    norm_bias: bool = False  # LayerNorm with a bias, not RMSNorm
    norms_per_layer: int = 2  # Gemma 2/3: 4 (pre and post, attention and MLP); GPT-J: 1 (parallel attention)
    embedding_norm: bool = False  # BLOOM normalizes the embeddings: one more LayerNorm
    position_offset: Optional[int] = None  # a learned position table max_position_embeddings + offset rows long
    alibi: bool = False  # ALiBi, no position table: no position limit either (max_position_embeddings absent)
    windows: str = ""  # which layers attend over sliding_window tokens where config.json lists no layer_types
    shared_expert_gate: bool = False  # Qwen2-MoE gates its shared expert with a hidden x 1 projection
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias: in the checkpoint, a buffer in transformers
    # The field of a dense (expert-less) layer's MLP width. Llama 4's intermediate_size is an expert's width: the
    # config's own fields win over planning's names, so its dense layers read intermediate_size_mlp.
    dense_width: str = "intermediate_size"
    derive: Optional[Callable[[Fields], Fields]] = None  # planning's names the family derives its own way
    # fp32-sized copies of a layer's [batch, heads, input, input] scores live at once in an eager-attention prefill.
    # MPT's attention keeps the scaled scores, their sum with ALiBi, the masked sum and the fp32 softmax: 3.0 measured
    # (peak RSS on a CPU, batch 4 x input 1024, fp32 and bf16). Llama's eager path measured 2.0 to 2.5 there; left
    # at the 1 the estimate has always used until that is decided for every family.
    eager_score_copies: int = 1


def _falcon(f: Fields) -> Fields:
    """FalconAttention: new_decoder_architecture's num_kv_heads, else one KV head for multi_query, else MHA; one
    LayerNorm before parallel attention and MLP, two otherwise (or ln_attn and ln_mlp in the new architecture)."""
    heads = f.get("num_attention_heads")
    new = bool(f.get("new_decoder_architecture"))
    kv_heads = (f.get("num_kv_heads") or heads) if new else 1 if f.get("multi_query") else heads
    two = (new and (f.get("num_ln_in_parallel_attn") or 2) == 2) or not f.get("parallel_attn")
    return {"num_key_value_heads": kv_heads, "layer_norms": 2 if two else 1}


def _deepseek(f: Fields) -> Fields:
    """MLA's head_dim is transformers' (qk_rope_head_dim); layers from first_k_dense_replace on have experts (both
    DeepseekV2 and V3 models build so, moe_layer_freq unread); the shared experts are one MLP that wide."""
    out: Fields = {"head_dim": f.get("qk_rope_head_dim"), "num_local_experts": f.get("n_routed_experts")}
    if f.get("num_hidden_layers") is not None and f.get("first_k_dense_replace") is not None:
        out["num_moe_layers"] = max(0, f["num_hidden_layers"] - f["first_k_dense_replace"])
    if f.get("n_shared_experts") and f.get("moe_intermediate_size"):
        out["shared_expert_intermediate_size"] = f["n_shared_experts"] * f["moe_intermediate_size"]
    return out


def _llama4(f: Fields) -> Fields:
    """Llama4TextConfig's own derivations: MoE layers every interleave_moe_layer_step-th (or moe_layers), a shared
    expert as wide as an expert, chunked attention on the RoPE layers (all but every no_rope_layer_interval-th)."""
    layers = f.get("num_hidden_layers")
    if layers is None:
        return {}
    step = f.get("interleave_moe_layer_step") or 1
    moe: Sequence[int] = f["moe_layers"] if f.get("moe_layers") is not None else range(step - 1, layers, step)
    interval = f.get("no_rope_layer_interval") or 4
    rope = f.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(layers)]
    return {"num_moe_layers": len(moe), "shared_expert_intermediate_size": f.get("intermediate_size"),
            "layer_types": ["chunked_attention" if uses_rope else "full_attention" for uses_rope in rope]}


def _gelu(**family: Any) -> Family:
    """The GPT-2 lineage: a two-matrix MLP, LayerNorms with biases."""
    return Family(mlp_matrices=2, norm_bias=True, **family)


def _deepseek_family(router_bias: bool) -> Family:
    return Family(defaults={"tie_word_embeddings": False}, aliases={"num_local_experts": "n_routed_experts"},
                  derive=_deepseek, fast_if={"attention_bias": False}, router_bias=router_bias,
                  stated=("q_lora_rank", "n_shared_experts", "first_k_dense_replace"),
                  required=("num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "kv_lora_rank",
                            "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"))


QWEN_MOE = ("num_local_experts", "num_experts_per_tok", "moe_intermediate_size")
MPT_ALIASES = {"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers",
               "max_position_embeddings": "max_seq_len"}
GPT2_ALIASES = {"hidden_size": "n_embd", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer",
                "max_position_embeddings": "n_positions", "intermediate_size": "n_inner"}
FAMILIES = {
    "llama": Family(defaults={"attention_bias": False, "mlp_bias": False}),
    "mistral": Family(stated=("sliding_window",), windows="all"),
    "mixtral": Family(required=("num_local_experts", "num_experts_per_tok"), windows="all"),
    "qwen2": Family(qkv_bias=True, windows="qwen"),
    "qwen2_moe": Family(defaults={"mlp_only_layers": [], "decoder_sparse_step": 1}, qkv_bias=True, windows="qwen",
                        aliases={"num_local_experts": "num_experts"}, shared_expert_gate=True,
                        required=QWEN_MOE + ("shared_expert_intermediate_size",)),
    "qwen3_moe": Family(defaults={"attention_bias": False, "mlp_only_layers": [], "decoder_sparse_step": 1},
                        aliases={"num_local_experts": "num_experts"}, qk_norm=True, required=QWEN_MOE, windows="qwen"),
    "mpt": Family(defaults={"tie_word_embeddings": True, "expansion_ratio": 4}, aliases=MPT_ALIASES, mlp_matrices=2,
                  eager_score_copies=3),
    "llama4_text": Family(defaults={"tie_word_embeddings": False, "attention_bias": False, "no_rope_layer_interval": 4,
                                    "interleave_moe_layer_step": 1}, dense_width="intermediate_size_mlp",
                          stated=("head_dim", "num_key_value_heads", "attention_chunk_size"), derive=_llama4,
                          required=("num_local_experts", "num_experts_per_tok", "intermediate_size_mlp")),
    "phi3": Family(defaults={"tie_word_embeddings": False}, bias_flags=(), windows="all"),
    "gemma2": Family(defaults={"tie_word_embeddings": True, "attention_bias": False}, stated=("sliding_window",),
                     norms_per_layer=4, windows="alternate"),
    "gemma3_text": Family(defaults={"tie_word_embeddings": True, "attention_bias": False}, stated=("sliding_window",),
                          norms_per_layer=4, qk_norm=True, windows="pattern"),
    "deepseek_v2": _deepseek_family(router_bias=False),
    "deepseek_v3": _deepseek_family(router_bias=True),
    "gpt2": _gelu(defaults={"tie_word_embeddings": True}, aliases=GPT2_ALIASES, mlp_ratio=4, qkv_bias=True,
                  o_bias=True, mlp_bias=True, position_offset=0),
    "gptj": _gelu(defaults={"tie_word_embeddings": False}, aliases=GPT2_ALIASES, mlp_ratio=4, mlp_bias=True,
                  bias_flags=(), head_bias=True, norms_per_layer=1),
    "gpt_neox": _gelu(defaults={"tie_word_embeddings": False, "attention_bias": True}, mlp_bias=True),
    "opt": _gelu(defaults={"tie_word_embeddings": True, "enable_bias": True}, aliases={"intermediate_size": "ffn_dim"},
                 bias_flags=("enable_bias",), mlp_bias_flags=("enable_bias",), position_offset=2,
                 fast_if={"do_layer_norm_before": True, "_remove_final_layer_norm": False,
                          "layer_norm_elementwise_affine": True}),
    "bloom": _gelu(defaults={"tie_word_embeddings": True}, mlp_ratio=4, qkv_bias=True, o_bias=True, mlp_bias=True,
                   aliases={"hidden_size": "n_embed", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"},
                   embedding_norm=True, alibi=True),
    "falcon": _gelu(defaults={"tie_word_embeddings": True, "max_position_embeddings": 2048, "bias": False,
                              "multi_query": True, "parallel_attn": True, "new_decoder_architecture": False},
                    aliases={"hidden_size": "n_embed", "num_attention_heads": "n_head",
                             "num_hidden_layers": "n_layer", "intermediate_size": "ffn_hidden_size"},
                    mlp_ratio=4, bias_flags=("bias",), mlp_bias_flags=("bias",), derive=_falcon),
}


def family_of(c: Any) -> Family:
    """The family of a config (a dict or a view); an unknown one reads as plain Llama-like attention."""
    model_type = c.get("model_type") if isinstance(c, Mapping) else getattr(c, "model_type", None)
    return FAMILIES.get(model_type or "", Family())


@dataclass(frozen=True)
class KvLayout:
    """How one sequence's KV cache grows with its context.

    `values_per_layer` a token caches in each layer: keys and values, 2 x KV heads x head_dim; with multi-head latent
    attention (DeepSeek V2/V3) the compressed latent and the shared rope key, kv_lora_rank + qk_rope_head_dim, once
    (vLLM and SGLang cache exactly that). Window layers (sliding or chunked attention) hold at most `window_tokens`:
    HF's sliding and hybrid caches and vLLM's hybrid allocator keep window-sized caches for them, and HF's dynamic
    sliding layer keeps window - 1 past tokens plus the new one, so min(context, window) is never below what an
    engine holds. An engine that keeps every layer whole only makes the estimate an under-count where it does so;
    the capacity per token (`values_per_token`) still counts every layer at full context.
    """

    values_per_layer: int
    full_layers: int
    window_layers: int = 0
    window_tokens: int = 0

    @property
    def values_per_token(self) -> int:
        """Values a token adds to the cache while every layer still holds it (context within every window)."""
        return self.values_per_layer * (self.full_layers + self.window_layers)

    def layer_tokens(self, context_tokens: float) -> float:
        """Tokens cached, summed over layers, at `context_tokens` of context."""
        held = min(context_tokens, self.window_tokens) if self.window_layers else 0.0
        return self.full_layers * context_tokens + self.window_layers * held

    def values_at(self, context_tokens: float) -> float:
        return self.values_per_layer * self.layer_tokens(context_tokens)


def layer_windows(c: Any) -> List[int]:
    """Per layer, the tokens it attends over: 0 for all of them, else its sliding or chunked window."""
    layers, family = c.num_hidden_layers, family_of(c)
    window = getattr(c, "sliding_window", None) or 0
    types = getattr(c, "layer_types", None)
    if isinstance(types, list) and len(types) == layers:
        sizes = {"sliding_attention": window, "chunked_attention": getattr(c, "attention_chunk_size", None) or 0}
        return [sizes.get(kind, 0) for kind in types]
    if not window or family.windows == "":
        return [0] * layers
    if family.windows == "alternate":  # Gemma 2: even layers slide
        return [window if i % 2 == 0 else 0 for i in range(layers)]
    if family.windows == "pattern":  # Gemma 3: every sliding_window_pattern-th layer is global
        pattern = getattr(c, "sliding_window_pattern", None) or 6
        return [window if (i + 1) % pattern else 0 for i in range(layers)]
    if family.windows == "qwen":  # Qwen2: layers from max_window_layers on, when use_sliding_window
        if not getattr(c, "use_sliding_window", False):
            return [0] * layers
        first = getattr(c, "max_window_layers", None) or 0
        return [window if i >= first else 0 for i in range(layers)]
    return [window] * layers  # "all": Mistral-7B-v0.1, Phi-3


def dense_mlp_width(c: Any) -> int:
    """The MLP width of a layer without experts (Family.dense_width)."""
    return getattr(c, family_of(c).dense_width)


def kv_layout(c: Any) -> KvLayout:
    """The KV cache of `c` (planning's names; a multimodal config's text_config is the caller's to pass)."""
    latent = getattr(c, "kv_lora_rank", None)
    if latent:
        values = latent + c.qk_rope_head_dim
    else:
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        values = 2 * (getattr(c, "num_key_value_heads", None) or c.num_attention_heads) * head_dim
    windows = [w for w in layer_windows(c) if w]
    return KvLayout(values, c.num_hidden_layers - len(windows), len(windows), max(windows, default=0))


def attention_widths(c: Any) -> Tuple[int, int]:
    """(QK^T width, AV width) over all query heads: head_dim each; MLA's qk_nope + qk_rope and v_head_dim."""
    heads = c.num_attention_heads
    if getattr(c, "kv_lora_rank", None):
        return heads * (c.qk_nope_head_dim + c.qk_rope_head_dim), heads * c.v_head_dim
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    return heads * head_dim, heads * head_dim


def _flag(c: Any, flags: Tuple[str, ...]) -> bool:
    return any(getattr(c, name, False) for name in flags)


def _attention_parameters(c: Any, family: Family) -> int:
    """One layer's attention: projections, their biases, query/key norms; MLA's low-rank projections and norms."""
    hidden, heads = c.hidden_size, c.num_attention_heads
    if getattr(c, "kv_lora_rank", None):
        qk_width, rank = c.qk_nope_head_dim + c.qk_rope_head_dim, c.kv_lora_rank
        query = (hidden * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * heads * qk_width  # q_a, its norm, q_b
                 if c.q_lora_rank else hidden * heads * qk_width)
        latent = hidden * (rank + c.qk_rope_head_dim) + rank + rank * heads * (c.qk_nope_head_dim + c.v_head_dim)
        return query + latent + heads * c.v_head_dim * hidden
    q_width, kv_width = heads * c.head_dim, c.num_key_value_heads * c.head_dim
    params = hidden * (q_width + 2 * kv_width) + q_width * hidden
    flagged = _flag(c, family.bias_flags)
    params += q_width + 2 * kv_width if family.qkv_bias or flagged else 0
    params += hidden if family.o_bias or flagged else 0
    return params + (2 * c.head_dim if family.qk_norm else 0)


def _mlp_parameters(c: Any, family: Family, width: int) -> int:
    biased = family.mlp_bias or _flag(c, family.mlp_bias_flags)
    bias = (family.mlp_matrices - 1) * width + c.hidden_size if biased else 0
    return family.mlp_matrices * c.hidden_size * width + bias


def _moe_parameters(c: Any, family: Family) -> int:
    """One MoE layer: its experts, the router (and V3's router bias), the shared expert (and Qwen2-MoE's gate)."""
    experts, hidden = c.num_local_experts, c.hidden_size
    params = experts * _mlp_parameters(c, family, c.moe_intermediate_size) + hidden * experts
    params += experts if family.router_bias else 0
    shared = getattr(c, "shared_expert_intermediate_size", None) or 0
    if shared:
        params += _mlp_parameters(c, family, shared) + (hidden if family.shared_expert_gate else 0)
    return params


def count_parameters(c: Any) -> int:
    """Every parameter of the family's CausalLM: embeddings (a learned position table, OPT's projections), attention,
    the MLP or the experts (dense MLPs on layers without experts), the layer norms, the final norm (BLOOM's embedding
    norm) and the head unless tied. RMSNorms count their weight, LayerNorms weight and bias."""
    family = FAMILIES[c.model_type]
    hidden, vocab, layers = c.hidden_size, c.vocab_size, c.num_hidden_layers
    norm = hidden * (2 if family.norm_bias else 1)
    layer_norms = getattr(c, "layer_norms", None) or family.norms_per_layer
    moe_layers = getattr(c, "num_moe_layers", None) or 0
    body = (layers * (_attention_parameters(c, family) + layer_norms * norm)
            + moe_layers * (_moe_parameters(c, family) if moe_layers else 0)
            + (layers - moe_layers) * _mlp_parameters(c, family, dense_mlp_width(c)))
    width = getattr(c, "word_embed_proj_dim", None) or hidden  # OPT-350m embeds narrower and projects in and out
    embeddings = vocab * width + (2 * width * hidden if width != hidden else 0)
    if family.position_offset is not None:
        embeddings += (c.max_position_embeddings + family.position_offset) * hidden
    head = 0 if c.tie_word_embeddings else vocab * width + (vocab if family.head_bias else 0)
    return embeddings + body + norm * (2 if family.embedding_norm else 1) + head

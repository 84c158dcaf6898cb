"""What the numbers mean: bytes and FLOPs of a point from the model's shape, held against the hardware's peaks
(MBU, MFU, the roofline) and its price. The formulas and their simplifications are docs/measurement.md's,
"What the numbers mean"; everything here is arithmetic on a config, nothing is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from harness.model.families import KvLayout, attention_widths, kv_layout
from harness.model.hardware import Peaks
from harness.model.spec import ModelSpec

# decode_flops_per_step and prefill_bytes place the point on a roofline chart (arithmetic intensity = FLOPs / bytes).
ROOFLINE_COLUMNS = ["peak_memory_bandwidth_gbps", "peak_tflops", "decode_bytes_per_step", "decode_flops_per_step",
                    "decode_bandwidth_gbps", "mbu", "prefill_bytes", "prefill_flops", "prefill_tflops", "mfu",
                    "roofline_latency_ms", "roofline_ratio", "cost_per_million_output_tokens"]


@dataclass(frozen=True)
class Shape:
    """The sizes the formulas need, from a model config."""

    layers: int
    hidden: int
    attention_width: int  # query heads x head_dim: the width of QK^T (and of AV unless value_width says otherwise)
    kv_width: int  # KV heads x head_dim: half what a layer caches per token (MLA: its latent and rope key, halved)
    vocab: int
    num_params: int
    tied_embeddings: bool
    experts: int  # per MoE layer; 1 for a dense model
    experts_per_token: int
    expert_params: int  # one expert of one layer (gate, up and down projections); 0 for a dense model
    dtype_bytes: int
    moe_layers: int = 0  # layers with experts (the rest have a dense MLP, counted in body_params whole)
    weight_bytes: float = 0.0  # a linear layer's weight as loaded (harness/model/quantized.py); 0: dtype_bytes
    value_width: int = 0  # query heads x the value head's width: AV's width (MLA: v_head_dim); 0: attention_width
    # The KV cache's layout (harness/model/families.py, the memory estimate's too): MLA's latent, window layers.
    # None: every layer caches 2 x kv_width values per token over the whole context.
    kv: Optional[KvLayout] = None

    @classmethod
    def of(cls, model: ModelSpec) -> "Shape":
        """From planning's names (harness/model/config_json.py), whatever the family calls them."""
        c = getattr(model.config, "text_config", None) or model.config
        moe_layers = getattr(c, "num_moe_layers", None) or 0
        experts = c.num_local_experts if moe_layers else 1
        layout = kv_layout(c)
        qk_width, value_width = attention_widths(c)
        return cls(c.num_hidden_layers, c.hidden_size, qk_width, layout.values_per_layer // 2, c.vocab_size,
                   model.num_params, bool(getattr(c, "tie_word_embeddings", False)), experts,
                   c.num_experts_per_tok if moe_layers else 1,
                   3 * c.hidden_size * c.moe_intermediate_size if moe_layers else 0, model.dtype_bytes, moe_layers,
                   model.quantized.bytes_per_weight if model.quantized else model.dtype_bytes, value_width, layout)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def body_params(self) -> int:
        """Every parameter but the input embedding and the output head: what each token multiplies through."""
        return self.num_params - self.embedding_params * (1 if self.tied_embeddings else 2)

    def experts_activated(self, tokens: int) -> float:
        """Expected distinct experts per layer that `tokens` tokens route to, each to `experts_per_token` of them,
        routing uniform and independent (real routers are neither: a statement of scale, not a measurement)."""
        if self.experts == 1:
            return 1.0
        return self.experts * (1 - (1 - self.experts_per_token / self.experts) ** tokens)

    def body_params_read(self, tokens: int) -> float:
        """Body parameters a forward pass over `tokens` tokens reads: all, except experts no token routes to."""
        idle = self.experts - self.experts_activated(tokens) if self.experts > 1 else 0.0
        return self.body_params - self.moe_layers * idle * self.expert_params

    @property
    def body_params_per_token(self) -> int:
        """Body parameters one token multiplies through: a MoE token only its experts_per_token experts."""
        return self.body_params - self.moe_layers * (self.experts - self.experts_per_token) * self.expert_params

    @property
    def linear_weight_bytes(self) -> float:
        return self.weight_bytes or self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes a token adds while every layer holds it (a context within every window)."""
        if self.kv is not None:
            return self.kv.values_per_token * self.dtype_bytes
        return 2 * self.layers * self.kv_width * self.dtype_bytes

    def kv_bytes_at(self, context_tokens: float) -> float:
        """One sequence's KV-cache bytes at `context_tokens` of context: window layers hold their window only."""
        if self.kv is not None:
            return self.kv.values_at(context_tokens) * self.dtype_bytes
        return context_tokens * self.kv_bytes_per_token

    def layer_keys(self, context_tokens: float) -> float:
        """Keys one query attends to at `context_tokens`, summed over layers (window layers: their window)."""
        return self.kv.layer_tokens(context_tokens) if self.kv is not None else self.layers * context_tokens

    def causal_layer_keys(self, prompt_tokens: int) -> float:
        """Query-key pairs of a causal prefill of `prompt_tokens`, summed over layers: n^2 / 2 per full layer; a
        window layer's queries past the window attend to the window only."""
        full = prompt_tokens * prompt_tokens / 2
        if self.kv is None:
            return self.layers * full
        window = min(prompt_tokens, self.kv.window_tokens)
        windowed = window * window / 2 + (prompt_tokens - window) * window
        return self.kv.full_layers * full + self.kv.window_layers * windowed

    @property
    def qk_av_width(self) -> int:
        """QK^T's width plus AV's: 2 FLOPs per multiply-add, per key attended."""
        return self.attention_width + (self.value_width or self.attention_width)


def decode_bytes_per_step(s: Shape, batch_size: int, context: float) -> float:
    """One decode step: the body's weights (a MoE's routed experts), the output head, and every sequence's KV cache
    at `context` tokens. The input embedding is a lookup of `batch_size` rows: left out."""
    weights = (s.body_params_read(batch_size) + s.embedding_params) * s.linear_weight_bytes
    return weights + batch_size * s.kv_bytes_at(context)


def decode_flops_per_step(s: Shape, batch_size: int, context: float) -> float:
    """Matmuls (2 FLOPs per multiply-add): body and head per sequence, attention over `context` keys (QK^T, AV; a
    window layer over its window)."""
    return batch_size * (2 * (s.body_params_per_token + s.embedding_params) + 2 * s.qk_av_width * s.layer_keys(context))


def prefill_bytes(s: Shape, prompt_lengths: Sequence[int]) -> float:
    """The weights the prompts route through, and each prompt's KV cache written (a window layer's window)."""
    tokens = sum(prompt_lengths)
    kv = sum(s.kv_bytes_at(n) for n in prompt_lengths)
    return (s.body_params_read(tokens) + s.embedding_params) * s.linear_weight_bytes + kv


def prefill_flops(s: Shape, prompt_lengths: Sequence[int]) -> float:
    """Body matmuls for every prompt token, the head for each sequence's last position only (what engines compute),
    and causal attention: 2 FLOPs x (QK^T + AV width) per query-key pair, n^2 / 2 pairs a layer (a window layer
    fewer)."""
    tokens = sum(prompt_lengths)
    attention = 2 * s.qk_av_width * sum(s.causal_layer_keys(n) for n in prompt_lengths)
    return 2 * s.body_params_per_token * tokens + 2 * s.embedding_params * len(prompt_lengths) + attention


def roofline_latency_s(s: Shape, prompt_lengths: Sequence[int], output_tokens: int, bandwidth_bps: float,
                       flops: float) -> float:
    """The request's lower bound from the two peaks: the prefill at the slower of its bytes and FLOPs, then each
    decode step at the slower of its own, the context growing by one token a step."""
    def bound(moved: float, computed: float) -> float:
        return max(moved / bandwidth_bps, computed / flops)

    batch, mean_prompt = len(prompt_lengths), sum(prompt_lengths) / len(prompt_lengths)
    total = bound(prefill_bytes(s, prompt_lengths), prefill_flops(s, prompt_lengths))
    for step in range(1, output_tokens):
        context = mean_prompt + step
        total += bound(decode_bytes_per_step(s, batch, context), decode_flops_per_step(s, batch, context))
    return total


@dataclass(frozen=True)
class Measured:
    """A batch point's figures the formulas are held against (per-batch means over its timed batches)."""

    batch_size: int
    prompt_lengths: Sequence[Sequence[int]]  # per timed batch, per sequence
    output_tokens_mean: float
    output_tokens_max: int
    latency_ms: float
    ttft_ms: float
    tpot_ms: Optional[float]


def explain(s: Shape, m: Optional[Measured], peaks: Optional[Peaks], num_devices: int, tokens_per_s: Optional[float],
            cost_per_hour: Optional[float]) -> Dict[str, Optional[float]]:
    """Every ROOFLINE_COLUMNS figure that can be known: the roofline figures need a batch point (`m`) and peaks; the
    cost a throughput and a price. `num_devices` multiplies a GPU's peaks (a CPU's probe measured the whole
    machine: pass 1)."""
    out: Dict[str, Optional[float]] = dict.fromkeys(ROOFLINE_COLUMNS)
    if cost_per_hour and tokens_per_s:
        out["cost_per_million_output_tokens"] = cost_per_hour * num_devices / 3600 / tokens_per_s * 1e6
    if m is None or peaks is None:
        return out
    bandwidth_bps = peaks.memory_bandwidth_gbps * 1e9 * num_devices
    flops = peaks.tflops * 1e12 * num_devices
    out["peak_memory_bandwidth_gbps"], out["peak_tflops"] = bandwidth_bps / 1e9, flops / 1e12
    mean_prompt = sum(map(sum, m.prompt_lengths)) / sum(map(len, m.prompt_lengths))
    if m.tpot_ms:
        context = mean_prompt + m.output_tokens_mean / 2
        moved = decode_bytes_per_step(s, m.batch_size, context)
        out["decode_bytes_per_step"] = moved
        out["decode_flops_per_step"] = decode_flops_per_step(s, m.batch_size, context)
        out["decode_bandwidth_gbps"] = decode_gbps = moved / (m.tpot_ms / 1e3) / 1e9
        out["mbu"] = decode_gbps * 1e9 / bandwidth_bps
    batches = len(m.prompt_lengths)
    computed = sum(prefill_flops(s, lengths) for lengths in m.prompt_lengths) / batches
    out["prefill_bytes"] = sum(prefill_bytes(s, lengths) for lengths in m.prompt_lengths) / batches
    out["prefill_flops"] = computed
    out["prefill_tflops"] = prefill_tflops = computed / (m.ttft_ms / 1e3) / 1e12
    out["mfu"] = prefill_tflops * 1e12 / flops
    bound_s = sum(roofline_latency_s(s, lengths, m.output_tokens_max, bandwidth_bps, flops)
                  for lengths in m.prompt_lengths) / len(m.prompt_lengths)
    out["roofline_latency_ms"] = bound_ms = bound_s * 1e3
    out["roofline_ratio"] = m.latency_ms / bound_ms
    return out

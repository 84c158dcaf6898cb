"""What the numbers mean: bytes and FLOPs of a point from the model's shape, held against the hardware's peaks
(MBU, MFU, the roofline) and its price. The formulas and their simplifications are docs/measurement.md's,
"What the numbers mean"; everything here is arithmetic on a config, nothing is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

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
    attention_width: int  # query heads x head_dim: the width of QK^T and AV
    kv_width: int  # KV heads x head_dim
    vocab: int
    num_params: int
    tied_embeddings: bool
    experts: int  # per MoE layer; 1 for a dense model
    experts_per_token: int
    expert_params: int  # one expert of one layer (gate, up and down projections); 0 for a dense model
    dtype_bytes: int
    moe_layers: int = 0  # layers with experts (the rest have a dense MLP, counted in body_params whole)
    weight_bytes: float = 0.0  # a linear layer's weight as loaded (harness/model/quantized.py); 0: dtype_bytes

    @classmethod
    def of(cls, model: ModelSpec) -> "Shape":
        """From planning's names (harness/model/config_json.py), whatever the family calls them."""
        c = getattr(model.config, "text_config", None) or model.config
        moe_layers = getattr(c, "num_moe_layers", None) or 0
        experts = c.num_local_experts if moe_layers else 1
        return cls(c.num_hidden_layers, c.hidden_size, c.num_attention_heads * c.head_dim,
                   c.num_key_value_heads * c.head_dim, c.vocab_size, model.num_params,
                   bool(getattr(c, "tie_word_embeddings", False)), experts,
                   c.num_experts_per_tok if moe_layers else 1,
                   3 * c.hidden_size * c.moe_intermediate_size if moe_layers else 0, model.dtype_bytes, moe_layers,
                   model.quantized.bytes_per_weight if model.quantized else model.dtype_bytes)

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
        return 2 * self.layers * self.kv_width * self.dtype_bytes


def decode_bytes_per_step(s: Shape, batch_size: int, context: float) -> float:
    """One decode step: the body's weights (a MoE's routed experts), the output head, and every sequence's KV cache
    at `context` tokens. The input embedding is a lookup of `batch_size` rows: left out."""
    weights = (s.body_params_read(batch_size) + s.embedding_params) * s.linear_weight_bytes
    return weights + batch_size * context * s.kv_bytes_per_token


def decode_flops_per_step(s: Shape, batch_size: int, context: float) -> float:
    """Matmuls (2 FLOPs per multiply-add): body and head per sequence, attention over `context` keys (QK^T, AV)."""
    return batch_size * (2 * (s.body_params_per_token + s.embedding_params) + 4 * s.layers * s.attention_width * context)


def prefill_bytes(s: Shape, prompt_lengths: Sequence[int]) -> float:
    tokens = sum(prompt_lengths)
    return (s.body_params_read(tokens) + s.embedding_params) * s.linear_weight_bytes + tokens * s.kv_bytes_per_token


def prefill_flops(s: Shape, prompt_lengths: Sequence[int]) -> float:
    """Body matmuls for every prompt token, the head for each sequence's last position only (what engines compute),
    and causal attention: 2 x layers x width x the sum of squared prompt lengths (half of 4 for the full square)."""
    tokens = sum(prompt_lengths)
    attention = 2 * s.layers * s.attention_width * sum(n * n for n in prompt_lengths)
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

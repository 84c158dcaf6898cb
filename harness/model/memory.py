"""Memory: what a point should need (what the machine has free is harness/model/hardware.py's, what a point
really used harness/measure/peak_memory.py's).

The estimate is deliberately simple and a little generous. Its job is to keep a sweep
from exhausting host memory (which kills the machine, not just the run) or from
spending minutes on a load that cannot fit; real out-of-memory errors on the device
are still caught and recorded as `oom` by the runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.model import config_json as config_view
from harness.model.families import dense_mlp_width, kv_layout
from harness.model.spec import ModelSpec

GiB = 1024**3
LOGITS_FP32_COPIES = 8  # see activation_bytes


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    def describe(self) -> str:
        return (
            f"{self.total_bytes / GiB:.1f} GiB (weights {self.weights_bytes / GiB:.1f}, "
            f"KV cache {self.kv_cache_bytes / GiB:.1f}, activations {self.activation_bytes / GiB:.1f})"
        )


def kv_cache_bytes(model: ModelSpec, batch_size: int, tokens: int) -> int:
    """`batch_size` sequences' KV caches at `tokens` tokens each, as harness/model/families.py's `kv_layout` lays
    them out (the roofline reads the same): the real KV heads (GQA/MQA shrink this 4-8x), MLA's latent, and
    sliding-window layers holding min(tokens, window) tokens, as engines allocate them (see `KvLayout`)."""
    c = getattr(model.config, "text_config", None) or model.config
    return int(batch_size * kv_layout(c).values_at(tokens) * model.dtype_bytes)


def activation_bytes(model: ModelSpec, batch_size: int, input_length: int, eager_attention: bool = False) -> int:
    """Peak transient memory of the prefill, the largest step of a generate call.

    One layer's hidden states and MLP intermediates (gate, up, product) are live at once;
    logits are kept for the last position only, in fp32 copies: the head's output, the sampler's upcast,
    and one per logits processor (forced length, EOS suppression). Measured with HF generate on a CPU
    (tiny-llama, 256 sequences, input 4): 254 MB above the weights, about eight [batch, vocab] fp32 copies.
    Eager attention also materializes fp32-sized score matrices, as many at once as the family's attention keeps
    (harness/model/config_json.py, `eager_score_copies`: MPT 3); SDPA/flash kernels do not.
    """
    c = model.config
    tokens = batch_size * input_length
    layer = tokens * (4 * c.hidden_size + 3 * mlp_width_per_token(c)) * model.dtype_bytes
    logits = LOGITS_FP32_COPIES * batch_size * c.vocab_size * 4
    copies = config_view.eager_score_copies(c)
    scores = copies * batch_size * c.num_attention_heads * input_length**2 * 4 if eager_attention else 0
    return layer + logits + scores + dequantized_layer_bytes(model)


def dequantized_layer_bytes(model: ModelSpec) -> int:
    """A quantized layout that multiplies by its weight dequantized (harness/model/quantized.py,
    `dequantize_bytes_per_weight`) holds copies of the largest linear layer while it runs: the LM head (vocab x hidden)
    or the MLP's widest."""
    if model.quantized is None or not model.quantized.dequantize_bytes_per_weight:
        return 0
    c = model.config
    widest = max(c.vocab_size, getattr(c, "intermediate_size", None) or 0)
    return int(widest * c.hidden_size * model.quantized.dequantize_bytes_per_weight)


def mlp_width_per_token(c) -> int:
    """The widest MLP one token goes through: its num_experts_per_tok experts (and the shared expert) on a MoE
    layer, the dense MLP on any other (planning's names: harness/model/config_json.py)."""
    moe_layers = getattr(c, "num_moe_layers", None) or 0
    shared = getattr(c, "shared_expert_intermediate_size", None) or 0
    widths = [c.moe_intermediate_size * c.num_experts_per_tok + shared] if moe_layers else []
    if moe_layers < c.num_hidden_layers:
        widths.append(dense_mlp_width(c))
    return max(widths)


def estimate_point(
    model: ModelSpec, batch_size: int, input_length: int, output_length: int, eager_attention: bool = False
) -> MemoryEstimate:
    return MemoryEstimate(
        weights_bytes=int(model.weights_bytes),
        kv_cache_bytes=kv_cache_bytes(model, batch_size, input_length + output_length),
        activation_bytes=activation_bytes(model, batch_size, input_length, eager_attention),
    )

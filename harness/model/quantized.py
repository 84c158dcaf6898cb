"""What `model.quantization` does to a model's bytes, for planning (the memory estimate, `--plan`) and the roofline
(MBU): docs/measurement.md, "Quantization". Nothing is loaded: these are the storage layouts of the engines'
quantized linear layers, per weight, scales and zero points included. What an engine really loaded is its
`weight_bytes` column.

Every linear layer is quantized, the output head included; the input embedding, the norms, the KV cache and the
activations keep the model's dtype. A tied head becomes a layer of its own: quantizing it replaces the head's weight,
and the embedding keeps the one they shared.
"""

from __future__ import annotations

from dataclasses import dataclass

INT4_GPU_GROUP = 128  # torchao Int4WeightOnlyConfig (backends/generate/quantization.py)
INT4_CPU_GROUP = 32  # torchao IntxWeightOnlyConfig, which keeps each int4 value in a byte on the CPU


@dataclass(frozen=True)
class Quantized:
    """A model's linear layers as an entry loads them."""

    method: str  # int8 | int4 | fp8
    bytes_per_weight: float
    # Bytes per weight that a layer's matmul holds while it runs, for a layout that multiplies by its weight
    # dequantized, one layer at a time: a transient of the largest linear layer (`dequantize_bytes_per_weight`).
    dequantize_bytes_per_weight: float = 0.0


def dequantize_bytes_per_weight(method: str, device: str, dtype_bytes: int) -> float:
    """What one weight's dequantized copies hold during its layer's matmul, in torchao 0.18's weight-only paths.

    - int8 on CUDA multiplies by the weight cast to the activations' dtype: measured on an H200 (Llama-3.1-8B shape,
      bf16, batch 1), the allocator's peak was 1.06 GB above the weights and KV cache, the LM head's 128256 x 4096
      bf16 copy.
    - fp8 (`Float8Tensor` without activation scaling) multiplies by `dequantize()`, which casts the fp8 values to
      fp32, multiplies them by the scale into a second fp32 tensor and casts that to the dtype, the first two still
      live: 4 + 4 + 2 bytes. Measured on the same H200 at batch 1: 13.95 GB where the weights, KV cache and
      activations are 8.70 GB, 5.25 GB above them, which is the LM head's 525 M weights x 10 bytes.
    - On the CPU int8 runs torch's int8 matmul kernel, and int4 has its own kernels on both."""
    if device != "cuda":
        return 0.0
    if method == "int8":
        return float(dtype_bytes)
    if method == "fp8":
        return 4.0 + 4.0 + dtype_bytes
    return 0.0


def bytes_per_weight(method: str, device: str, dtype_bytes: int) -> float:
    """One weight of a quantized linear layer, with its share of the scales. int8 and fp8 keep one scale (and an int8
    zero point) per output row: under 1% of a row of 512 or more, left out."""
    if method == "none":
        return float(dtype_bytes)
    if method in ("int8", "fp8"):
        return 1.0
    if method == "int4" and device == "cuda":
        return 0.5 + 2 * 2 / INT4_GPU_GROUP  # packed pairs; a bf16 scale and zero point per group
    if method == "int4":
        return 1.0 + (dtype_bytes + 1) / INT4_CPU_GROUP  # a byte per value; a scale in the dtype, an int8 zero point
    raise ValueError(f"unknown quantization {method!r}")


def weights_bytes(num_params: int, embedding_params: int, tied: bool, dtype_bytes: int,
                  quantized: "Quantized | None") -> float:
    """The weights as loaded: the input embedding at the dtype, every other parameter at the quantized layout (the
    norms too: a rounding error), a tied head once more, quantized."""
    if quantized is None:
        return float(num_params * dtype_bytes)
    linear = num_params - embedding_params + (embedding_params if tied else 0)
    return embedding_params * dtype_bytes + linear * quantized.bytes_per_weight

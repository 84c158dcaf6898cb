"""The memory estimate of a quantized entry counts the transient its kernels make: torchao's int8 and fp8 weight-only
layouts on CUDA multiply by the weight dequantized, one layer at a time (harness/model/quantized.py)."""

import pytest

from harness.config.sections import ModelConfig
from harness.model.memory import activation_bytes, dequantized_layer_bytes, estimate_point
from harness.model.spec import resolve_model

# The allocator's peaks at batch 1, input 512, output 128 on an NVIDIA H200, where the estimate without the transient
# said 8.70 GB for both: hf-eager-int8 9.76 GB (2026-11-26, docs/results/h200-20261126/headline-quantization) and
# hf-eager-fp8 13.95 GB (2026-11-27, docs/results/h200-20261127/headline-quantization); int4, with its own kernel,
# 5.23 GB where the estimate says 5.19 GB.
H200_PEAK_BYTES = {"int8": 9.76e9, "int4": 5.23e9, "fp8": 13.95e9}


@pytest.fixture(scope="module")
def llama8b():
    return resolve_model(ModelConfig(preset="llama-3.1-8b", dtype="bf16"))


def test_int8_on_cuda_holds_the_widest_layer_dequantized(llama8b):
    c = llama8b.config
    int8 = llama8b.loaded_as("int8", "cuda")
    assert dequantized_layer_bytes(int8) == max(c.vocab_size, c.intermediate_size) * c.hidden_size * 2
    assert (activation_bytes(int8, 1, 512) - activation_bytes(llama8b, 1, 512)
            == dequantized_layer_bytes(int8))


def test_fp8_on_cuda_holds_two_fp32_copies_and_the_cast(llama8b):
    """torchao's `dequantize` of a Float8Tensor: fp8 -> fp32, times the scale into another fp32, cast to bf16."""
    c = llama8b.config
    assert dequantized_layer_bytes(llama8b.loaded_as("fp8", "cuda")) == c.vocab_size * c.hidden_size * (4 + 4 + 2)


@pytest.mark.parametrize("method, device", [("none", "cuda"), ("int8", "cpu"), ("int4", "cuda"), ("int4", "cpu")])
def test_layouts_with_their_own_kernels_add_nothing(llama8b, method, device):
    assert dequantized_layer_bytes(llama8b.loaded_as(method, device)) == 0


@pytest.mark.parametrize("method", sorted(H200_PEAK_BYTES))
def test_the_estimate_meets_the_peak_measured_on_a_gpu(llama8b, method):
    estimate = estimate_point(llama8b.loaded_as(method, "cuda"), 1, 512, 128)
    assert estimate.total_bytes == pytest.approx(H200_PEAK_BYTES[method], rel=0.01)

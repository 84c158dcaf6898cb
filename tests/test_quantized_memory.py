"""The memory estimate of a quantized entry counts the transient its kernels make: torchao's int8 weight-only on CUDA
multiplies by the weight dequantized to the model's dtype, one layer at a time (harness/model/quantized.py)."""

import pytest

from harness.config.sections import ModelConfig
from harness.model.memory import activation_bytes, dequantized_layer_bytes, estimate_point
from harness.model.spec import resolve_model

# The allocator's peak of hf-eager-int8 at batch 1, input 512, output 128 on an NVIDIA H200 (2026-11-26,
# docs/results/h200-20261126/headline-quantization/results.csv): 9.76 GB, where the estimate said 8.70 GB.
H200_INT8_PEAK_BYTES = 9.76e9


@pytest.fixture(scope="module")
def llama8b():
    return resolve_model(ModelConfig(preset="llama-3.1-8b", dtype="bf16"))


def test_int8_on_cuda_holds_the_widest_layer_dequantized(llama8b):
    c = llama8b.config
    int8 = llama8b.loaded_as("int8", "cuda")
    assert dequantized_layer_bytes(int8) == max(c.vocab_size, c.intermediate_size) * c.hidden_size * 2
    assert (activation_bytes(int8, 1, 512) - activation_bytes(llama8b, 1, 512)
            == dequantized_layer_bytes(int8))


@pytest.mark.parametrize("method, device", [("none", "cuda"), ("int8", "cpu"), ("int4", "cuda"), ("int4", "cpu"),
                                            ("fp8", "cuda")])
def test_layouts_with_their_own_kernels_add_nothing(llama8b, method, device):
    assert dequantized_layer_bytes(llama8b.loaded_as(method, device)) == 0


def test_the_estimate_meets_the_peak_measured_on_a_gpu(llama8b):
    estimate = estimate_point(llama8b.loaded_as("int8", "cuda"), 1, 512, 128)
    assert estimate.total_bytes == pytest.approx(H200_INT8_PEAK_BYTES, rel=0.01)

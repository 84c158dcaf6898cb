"""Quantization and ZeRO-Inference on one GPU (docs/measurement.md, "Quantization" and "ZeRO-Inference"): the GPU
mappings the CPU suite cannot reach (tinygemm int4, vLLM's fp8, torchao's fp8 where the GPU has FP8), each quantized
row priced against its engine's bf16 entry, and ZeRO-Inference with the weights offloaded to host memory holding
fewer bytes on the GPU than the weights themselves.

llama-1b, random bf16 weights (vLLM loads the harness's: random_weights: harness), one sweep for the module.
"""

import os
import uuid

import pytest

from tests.conftest import run_benchmark
from tests.contract import MARKER, processes_with, rows
from tests.gpu.smoke import cuda_device_count, needs_engine

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(2400)]

SWEEP = """benchmark_name: gpu-quantization
model: {preset: llama-1b, weights: random, dtype: bf16, quantization: [none, int8, int4, fp8]}
backends:
  - {name: hf, device: cuda}
  - {name: vllm, device: cuda, random_weights: harness, gpu_memory_utilization: 0.5}
  - {name: deepspeed_zero, device: cuda, offload: cpu}
batch_sizes: [8]
input_lengths: [128]
output_lengths: [32]
num_batches: 3
num_warmup_batches: 1
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if not cuda_device_count():  # the CPU rehearsal too: these are the GPU's mappings
        pytest.skip("needs a CUDA device")
    folder = tmp_path_factory.mktemp("gpu-quantization")
    (folder / "sweep.yaml").write_text(SWEEP)
    marker = uuid.uuid4().hex
    proc = run_benchmark(folder / "sweep.yaml", "--output-dir", folder / "out", "--no-plots", timeout=2100,
                         env={**os.environ, MARKER: marker})
    assert not processes_with(marker)
    return proc, {r["backend"]: r for r in rows(folder / "out" / "results.csv")}


def fp8_capable() -> bool:
    import torch

    return torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_each_quantization_runs_on_the_gpu_with_its_price(results, engine):
    needs_engine(engine)
    _, found = results
    assert found[engine]["status"] == "ok", found[engine]["error"]
    for q in ("int8", "int4", "fp8"):
        row = found[f"{engine}-{q}"]
        if q == "fp8" and engine == "hf" and not fp8_capable():  # vLLM runs fp8 weight-only (Marlin) before 8.9
            assert row["status"] in ("error", "skipped") and "fp8" in row["error"], row
            continue
        assert row["status"] == "ok", row["error"]
        assert row["quality_reference"] == engine and 0 < float(row["logits_rel_error"]) < 0.5, row
        assert float(row["throughput_tokens_per_s"]) > 0


def test_hf_quantized_weights_are_smaller_on_the_gpu(results):
    """int4 on the GPU is packed (half a byte per weight), unlike the CPU's byte per value."""
    _, found = results
    weights = {q: int(found["hf" if q == "none" else f"hf-{q}"]["weight_bytes"]) for q in ("none", "int8", "int4")}
    assert weights["int4"] < weights["int8"] < weights["none"]


def test_zero_offload_holds_less_than_the_weights_on_the_gpu(results):
    needs_engine("deepspeed_zero")
    _, found = results
    zero = found["deepspeed_zero"]
    assert zero["status"] == "ok", zero["error"]
    assert float(zero["tokens_identical_share"]) > 0.9  # hf's weights; bf16 near-ties may flip a few
    weights = int(zero["weight_bytes"])
    assert int(zero["peak_memory_bytes"]) < weights < int(zero["peak_host_memory_bytes"])

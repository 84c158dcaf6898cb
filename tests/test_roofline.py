"""What the numbers mean: the formulas against hand-computed values (a dense model, GQA, Mixtral's top-2 of 8
experts), the GPU table, the peaks' precedence, and the CPU probe."""

import dataclasses
import json

import pytest

from harness.config.sections import HardwareConfig, ModelConfig
from harness.model.hardware import Peaks, datasheet_peaks, entry_peaks, match_gpu, measure_cpu_peaks
from harness.model.roofline import (
    Measured,
    Shape,
    decode_bytes_per_step,
    decode_flops_per_step,
    explain,
    prefill_bytes,
    prefill_flops,
    roofline_latency_s,
)
from harness.model.spec import resolve_model

# 2 layers, hidden 4, vocabulary 10, untied: embedding and head 40 parameters each, 100 in the body.
DENSE = Shape(layers=2, hidden=4, attention_width=4, kv_width=4, vocab=10, num_params=180, tied_embeddings=False,
              experts=1, experts_per_token=1, expert_params=0, dtype_bytes=2)


def test_dense_bytes_and_flops():
    assert DENSE.body_params == 100 and DENSE.kv_bytes_per_token == 2 * 2 * 4 * 2 == 32
    # Body and head read once (140 x 2 bytes), the input embedding not; 2 sequences x 5 tokens of KV.
    assert decode_bytes_per_step(DENSE, 2, 5) == 280 + 2 * 5 * 32 == 600
    # Per sequence: 2 x (100 + 40) for the matmuls, 4 x 2 layers x 4 wide x 5 keys for QK^T and AV.
    assert decode_flops_per_step(DENSE, 2, 5) == 2 * (280 + 160) == 880
    # Prompts of 3 and 5: body for 8 tokens, the head for 2 last positions, causal attention over 9 + 25.
    assert prefill_flops(DENSE, [3, 5]) == 2 * 100 * 8 + 2 * 40 * 2 + 2 * 2 * 4 * 34 == 2304
    assert prefill_bytes(DENSE, [3, 5]) == 280 + 8 * 32 == 536


def test_gqa_reads_only_its_kv_heads():
    gqa = dataclasses.replace(DENSE, kv_width=2)  # 1 KV head of 2 for 2 query heads
    assert gqa.kv_bytes_per_token == 16
    assert decode_bytes_per_step(gqa, 2, 5) == 280 + 2 * 5 * 16
    assert decode_flops_per_step(gqa, 2, 5) == decode_flops_per_step(DENSE, 2, 5)  # attention width is the queries'


def test_tied_embeddings_count_the_matrix_once():
    tied = dataclasses.replace(DENSE, num_params=140, tied_embeddings=True)
    assert tied.body_params == 100 and decode_bytes_per_step(tied, 2, 5) == decode_bytes_per_step(DENSE, 2, 5)


def test_mixtral_routes_two_of_eight_experts():
    shape = Shape.of(resolve_model(ModelConfig(preset="mixtral-8x7b")))
    assert (shape.experts, shape.experts_per_token, shape.expert_params) == (8, 2, 3 * 4096 * 14336)
    assert shape.experts_activated(1) == pytest.approx(2)
    assert shape.experts_activated(2) == pytest.approx(8 * (1 - 0.75**2))  # 3.5 expected under uniform routing
    assert shape.experts_activated(256) == pytest.approx(8)
    # Mistral's figures: 46.7B parameters, 12.9B active per token.
    assert shape.num_params == pytest.approx(46.7e9, rel=0.01)
    assert shape.body_params_per_token + 2 * shape.embedding_params == pytest.approx(12.9e9, rel=0.01)
    one = decode_bytes_per_step(shape, 1, 0)
    assert one == pytest.approx((shape.body_params_per_token + shape.embedding_params) * 2, rel=1e-9)
    assert decode_bytes_per_step(shape, 256, 0) == pytest.approx((shape.body_params + shape.embedding_params) * 2,
                                                                 rel=1e-6)


def test_roofline_is_the_slower_peak_of_each_phase():
    # 100 bytes/s and 1,000 FLOP/s: prefill 536 bytes (5.36 s) > 2,304 FLOPs (2.3 s); decode from context 5 then 6.
    assert roofline_latency_s(DENSE, [3, 5], 3, 100, 1000) == pytest.approx(5.36 + 6.00 + 6.64)


def test_explain_holds_measurements_against_the_peaks():
    peaks = Peaks(memory_bandwidth_gbps=1e-9 * 100, tflops=1e-12 * 1000, source="test")
    measured = Measured(batch_size=2, prompt_lengths=[(3, 5)], output_tokens_mean=3, output_tokens_max=3,
                        latency_ms=36_000, ttft_ms=4608, tpot_ms=12_000)
    out = explain(DENSE, measured, peaks, num_devices=2, tokens_per_s=0.5, cost_per_hour=3.6)
    assert out["peak_memory_bandwidth_gbps"] == pytest.approx(200e-9)
    assert out["decode_bytes_per_step"] == 280 + 2 * (4 + 1.5) * 32  # mean context: prompt + half the output
    assert out["mbu"] == pytest.approx(out["decode_bytes_per_step"] / 12 / 200)
    assert out["prefill_flops"] == 2304 and out["mfu"] == pytest.approx(2304 / 4.608 / 2000)
    bound_ms = roofline_latency_s(DENSE, [3, 5], 3, 200, 2000) * 1e3
    assert out["roofline_latency_ms"] == pytest.approx(bound_ms) and out["roofline_ratio"] == pytest.approx(36_000 / bound_ms)
    assert out["cost_per_million_output_tokens"] == pytest.approx(3.6 * 2 / 3600 / 0.5 * 1e6)  # 2 devices' hours
    assert explain(DENSE, None, peaks, 1, None, None) == dict.fromkeys(out)  # a stream point: nothing to hold


@pytest.mark.parametrize("name,key", [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
                                      ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
                                      ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"), ("NVIDIA A100 80GB PCIe",
                                                                                   "a100-pcie-80gb"),
                                      ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"), ("NVIDIA L4", "l4"),
                                      ("NVIDIA L40S", "l40s"), ("NVIDIA A10G", "a10g"), ("NVIDIA H200", "h200"),
                                      ("NVIDIA B200", "b200"), ("AMD Instinct MI300X", "mi300x"),
                                      ("NVIDIA GeForce RTX 4090", None)])
def test_gpu_names_match_the_table(name, key):
    assert match_gpu(name) == key


def test_the_yaml_overrides_the_table_figure_by_figure(tmp_path):
    table = datasheet_peaks("h100-sxm", "bf16")
    assert (table.memory_bandwidth_gbps, table.tflops) == (3350, 989.5)
    bandwidth_only = HardwareConfig(peak_memory_bandwidth_gbps=3000.0)
    mixed = entry_peaks("cuda", "bf16", bandwidth_only, ["NVIDIA H100 80GB HBM3"], tmp_path / "cache.json")
    assert (mixed.memory_bandwidth_gbps, mixed.tflops) == (3000.0, 989.5)
    assert "datasheet: h100-sxm" in mixed.source and "hardware.peak_memory_bandwidth_gbps" in mixed.source
    assert entry_peaks("cuda", "fp16", HardwareConfig(), ["NVIDIA GeForce RTX 4090"], tmp_path / "c.json") is None
    named = entry_peaks("cuda", "fp32", HardwareConfig(gpu="l4"), ["NVIDIA GeForce RTX 4090"], tmp_path / "c.json")
    assert named.tflops == 30.3
    given = HardwareConfig(peak_memory_bandwidth_gbps=10.0, peak_tflops=0.5)
    assert entry_peaks("cpu", "fp32", given, [], tmp_path / "never.json").tflops == 0.5
    assert not (tmp_path / "never.json").exists()  # both figures given: no probe


@pytest.mark.engine
def test_cpu_probe_measures_this_machine(tmp_path):
    peaks = measure_cpu_peaks("fp32")
    # Any machine this runs on: more than 1 GB/s and 1 GFLOP/s, less than a GPU.
    assert 1 < peaks.memory_bandwidth_gbps < 3000 and 1e-3 < peaks.tflops < 500
    assert peaks.source.startswith("measured: triad over 3 x 256 MiB")
    cache = tmp_path / "hardware_peaks.json"
    first = entry_peaks("cpu", "fp32", HardwareConfig(), [], cache)
    assert json.loads(cache.read_text())["fp32"]["tflops"] == first.tflops
    assert entry_peaks("cpu", "fp32", HardwareConfig(), [], cache) == first  # cached: measured once per folder


def test_energy_per_token_and_power_from_the_batches():
    from harness.measure.energy import EnergyMeter
    from harness.measure.metrics import energy_figures
    from harness.measure.records import BatchSample

    samples = [BatchSample(0, 500.0, 50.0, 10.0, (8, 8), (16, 16), energy_j=100.0),
               BatchSample(1, 1500.0, 50.0, 10.0, (8, 8), (16, 16), energy_j=300.0)]
    assert energy_figures(samples) == {"energy_j_per_output_token": 400 / 64, "avg_power_w": 400 / 2.0,
                                       "energy_kwh_per_million_output_tokens": 400 / 64 / 3.6}
    unread = [samples[0], BatchSample(1, 1500.0, 50.0, 10.0, (8, 8), (16, 16))]
    assert energy_figures(unread) == dict.fromkeys(  # never estimated
        ("energy_j_per_output_token", "avg_power_w", "energy_kwh_per_million_output_tokens"))
    assert EnergyMeter.open("cpu", 1) is None

"""What the numbers mean, end to end: llama-1b in fp32 on this CPU, held against the probe's peaks. Decode at batch 1
streams 4 GB of weights per token, so its MBU must be a real share of the measured bandwidth (0.2 to 1.0) and no
point may beat its roofline."""

import json

import pytest

from harness.model.hardware import measure_cpu_peaks
from tests.conftest import run_benchmark
from tests.contract import rows


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roofline")
    yaml = tmp / "roofline.yaml"
    yaml.write_text("""
benchmark_name: roofline
model: {preset: llama-1b, weights: random, dtype: fp32}
backends: [{name: hf, device: cpu}]
batch_sizes: [1, 2]
input_lengths: [32]
output_lengths: [8]
num_batches: 2
num_warmup_batches: 1
hardware: {cost_per_hour: 2.0}
""")
    proc = run_benchmark(yaml, "--output-dir", tmp / "out")
    return proc, tmp / "out"


# A shared VM's memory bandwidth moves with its neighbours: five probes seconds apart on the 2-core CI machine read
# 31 to 40 GB/s, while decode at batch 1 streams llama-1b at 32 to 40 (it reaches the machine's peak). A sweep's probe
# taken in a slow moment would make a fast decode read as more than the peak, so the check holds decode against the
# best peak of two moments, the sweep's probe and one taken here after it, with 5% for decode's own noise: a formula
# that counted the bytes twice would still be off by 2x. The matmul probe moves too (0.090 to 0.095 TFLOP/s on one
# core, five probes in a row), and prefill at 2 x 32 tokens reaches it: CI once read MFU 1.008. So MFU is held the
# same way.
NOISE = 1.05


@pytest.mark.engine
def test_llama_1b_decode_uses_a_real_share_of_the_measured_bandwidth(sweep):
    proc, out = sweep
    assert proc.returncode == 0, proc.stderr
    results = {int(r["batch_size"]): r for r in rows(out / "results.csv")}
    for r in results.values():  # llama-1b in fp32 needs about 5 GiB free: a host short of it skips, and says so
        assert r["status"] == "ok", (r["status"], r["error"])
    one = results[1]
    sweep_peak = float(one["peak_memory_bandwidth_gbps"])
    probed_here = measure_cpu_peaks("fp32")
    best_peak = max(sweep_peak, probed_here.memory_bandwidth_gbps)
    assert 0.2 <= float(one["decode_bandwidth_gbps"]) / best_peak <= NOISE, (one["mbu"], sweep_peak, best_peak)
    assert float(one["mbu"]) == pytest.approx(float(one["decode_bandwidth_gbps"]) / sweep_peak, rel=1e-3)
    # 1.24B parameters minus the input embedding, in fp32, plus a little KV cache: about 4.1 GB a step.
    assert 3.9e9 < float(one["decode_bytes_per_step"]) < 4.4e9
    for r in results.values():
        # The weights dominate: the whole estimate is within 15% of what the point added to the host's RSS.
        used = int(r["peak_memory_bytes"]) - int(r["memory_before_load_bytes"])
        assert int(r["estimated_memory_bytes"]) == pytest.approx(used, rel=0.15)
        # Against the best peak seen: a faster peak only makes the roofline faster, so the ratio grows at most
        # in proportion (decode points are bandwidth-bound).
        assert float(r["roofline_ratio"]) * best_peak / sweep_peak >= 1 / NOISE, (r["roofline_ratio"],
                                                                                     sweep_peak, best_peak)
        sweep_tflops = float(r["peak_tflops"])
        best_tflops = max(sweep_tflops, probed_here.tflops)
        assert 0 < float(r["mfu"]) * sweep_tflops / best_tflops <= NOISE, (r["mfu"], sweep_tflops, best_tflops)
        assert float(r["cost_per_million_output_tokens"]) == pytest.approx(
            2.0 / 3600 / float(r["throughput_tokens_per_s"]) * 1e6, rel=1e-3)


@pytest.mark.engine
def test_peaks_are_measured_once_and_recorded(sweep):
    _, out = sweep
    cached = json.loads((out / "hardware_peaks.json").read_text())
    peaks = json.loads((out / "manifest.json").read_text())["hardware_peaks"]["hf"]
    assert peaks["source"].startswith("measured: triad") and peaks["memory_bandwidth_gbps"] > 0
    assert cached["fp32"]["tflops"] == peaks["tflops"]
    r = rows(out / "results.csv")[0]
    assert float(r["peak_memory_bandwidth_gbps"]) == pytest.approx(peaks["memory_bandwidth_gbps"], rel=1e-4)


@pytest.mark.engine
def test_summary_report_and_charts_explain_the_numbers(sweep):
    proc, out = sweep
    assert "MBU" in proc.stdout and "x roofline" in proc.stdout
    report = (out / "plots" / "report.md").read_text()
    assert "| MBU there | MFU there | x roofline there |" in report
    assert (out / "plots" / "mbu_vs_batch_size.png").stat().st_size > 10_000
    assert len(list((out / "plots").glob("roofline_*.png"))) == 1

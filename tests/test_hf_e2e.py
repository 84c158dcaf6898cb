"""HF `generate` end to end through benchmark.py on the tiny preset: the CSV contract and its invariants."""

import csv
import json

import pytest

from harness.writers import RESULT_COLUMNS, SAMPLE_COLUMNS
from tests.conftest import run_benchmark

REQUIRED = (
    "benchmark_name, backend, model, dtype, hardware, num_devices, tp_size, batch_size, input_length, "
    "output_length, num_batches, status, error, latency_ms_mean, latency_ms_p50, latency_ms_p90, latency_ms_p99, "
    "latency_ms_std, ttft_ms_mean, ttft_ms_p50, ttft_ms_p90, ttft_ms_p99, tpot_ms_mean, tpot_ms_p50, tpot_ms_p90, "
    "tpot_ms_p99, throughput_tokens_per_s, prefill_tokens_per_s, latency_per_output_token_ms, peak_memory_bytes, "
    "load_time_s"
).split(", ")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf")
    yaml = tmp / "tiny.yaml"
    yaml.write_text(
        "benchmark_name: tiny\n"
        "model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
        "backends: [{name: hf, device: cpu}]\n"
        "batch_sizes: [1, 4]\ninput_lengths: [16, 64]\noutput_lengths: [1, 16]\n"
        "num_batches: 3\nnum_warmup_batches: 1\n"
    )
    out = tmp / "out"
    proc = run_benchmark(yaml, "--output-dir", out)
    return proc, out


def test_exit_code_and_files(sweep):
    proc, out = sweep
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"results.csv", "samples.csv", "manifest.json", "logs", "tokens.jsonl",
                                              "plots"}
    assert (out / "logs" / "hf.log").exists()  # the worker process's own output
    assert (out / "plots" / "report.md").exists() and "Charts and report in" in proc.stdout
    assert "Results" in proc.stdout and str(out) in proc.stdout


def test_results_contract(sweep):
    _, out = sweep
    results = rows(out / "results.csv")
    assert list(results[0].keys()) == RESULT_COLUMNS
    assert set(REQUIRED) <= set(RESULT_COLUMNS)
    assert len(results) == 8
    shapes = {(int(r["batch_size"]), int(r["input_length"]), int(r["output_length"])) for r in results}
    assert shapes == {(b, i, o) for b in (1, 4) for i in (16, 64) for o in (1, 16)}
    for r in results:
        assert r["status"] == "ok", r["error"]
        assert (r["backend"], r["model"], r["dtype"], r["num_devices"], r["tp_size"]) == ("hf", "tiny-llama", "fp32",
                                                                                          "1", "1")
        assert "cores" in r["hardware"]
        assert int(r["num_batches"]) == 3
        assert int(r["peak_memory_bytes"]) > 0 and float(r["load_time_s"]) > 0


def test_invariants(sweep):
    _, out = sweep
    for r in rows(out / "results.csv"):
        bs, n = int(r["batch_size"]), int(r["output_length"])
        latency, ttft = float(r["latency_ms_mean"]), float(r["ttft_ms_mean"])
        assert 0 < ttft <= latency
        assert float(r["throughput_tokens_per_s"]) == pytest.approx(bs * n / latency * 1000, rel=0.01)
        if n == 1:
            assert r["tpot_ms_mean"] == r["tpot_ms_p99"] == ""
            continue
        assert latency == pytest.approx(ttft + (n - 1) * float(r["tpot_ms_mean"]), rel=0.05)


def test_samples_one_row_per_timed_batch_with_exact_lengths(sweep):
    _, out = sweep
    samples = rows(out / "samples.csv")
    assert list(samples[0].keys()) == SAMPLE_COLUMNS
    assert len(samples) == 8 * 3
    for s in samples:
        assert int(s["min_output_tokens"]) == int(s["output_length"])
        assert float(s["ttft_ms"]) <= float(s["latency_ms"])


def test_manifest(sweep):
    _, out = sweep
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["batch_sizes"] == [1, 4]
    assert m["config"]["backends"][0]["device"] == "cpu"
    assert {"python", "torch", "transformers", "accelerate"} <= set(m["software"])
    assert {"cpu_model", "cpu_cores", "ram_bytes", "gpus", "cuda"} <= set(m["hardware"])
    assert m["model"]["num_params"] == 8_555_136
    assert m["start_time"] <= m["end_time"] and m["interrupted"] is False
    assert "benchmark.py" in m["command"][1]
    runtime = m["backends"][0]["runtime"]
    assert runtime["torch_threads"] >= 1 and runtime["load_time_s"] > 0

"""HF `generate` end to end through benchmark.py on the tiny preset: the CSV contract and its invariants."""

import json

import pytest

from harness.measure.writers import SAMPLE_COLUMNS
from tests.conftest import run_benchmark
from tests.contract import assert_csv_contract, rows, write_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf")
    yaml = write_sweep(tmp / "tiny.yaml", "{name: hf, device: cpu}", output_lengths="[1, 16]", num_batches=3)
    out = tmp / "out"
    proc = run_benchmark(yaml, "--output-dir", out)
    return proc, out


@pytest.mark.engine
def test_exit_code_and_files(sweep):
    proc, out = sweep
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"results.csv", "samples.csv", "manifest.json", "logs", "tokens.jsonl",
                                              "hardware_peaks.json", "plots", "config.yaml"}
    assert (out / "logs" / "hf.log").exists()  # the worker process's own output
    assert (out / "plots" / "report.md").exists() and "Charts and report in" in proc.stdout
    assert "Results" in proc.stdout and str(out) in proc.stdout


@pytest.mark.engine
def test_results_contract(sweep):
    _, out = sweep
    assert_csv_contract(out, "hf", points=8, num_batches=3, num_devices=1, tp_size=1)
    results = rows(out / "results.csv")
    shapes = {(int(r["batch_size"]), int(r["input_length"]), int(r["output_length"])) for r in results}
    assert shapes == {(b, i, o) for b in (1, 4) for i in (16, 64) for o in (1, 16)}
    for r in results:
        assert (r["backend"], r["model"], r["dtype"]) == ("hf", "tiny-llama", "fp32")
        assert "cores" in r["hardware"]
    assert list(rows(out / "samples.csv")[0].keys()) == SAMPLE_COLUMNS


@pytest.mark.engine
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
    # What hf decided, and a real engine's time budget (its arithmetic on the null engine: tests/test_compare_e2e.py)
    assert runtime["attn_implementation"] and runtime["kv_cache_dtype"] == "fp32" and runtime["compile"] is False
    assert isinstance(runtime["environment"], dict)
    budget = runtime["time_budget_s"]
    assert sum(v for k, v in budget.items() if k not in ("total_s", "overlap_s")) == pytest.approx(budget["total_s"])
    assert min(budget[k] for k in ("worker_start_s", "engine_import_s", "load_s", "timed_s")) > 0

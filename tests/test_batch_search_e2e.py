"""`batch_sizes: auto` through benchmark.py: hf runs up to max_batch_size; vLLM, its KV cache cut to 30 blocks,
is bisected down to the 30 sequences it holds at once. Probes are rows, the largest is marked, resume reruns
nothing."""

import pytest

from tests.conftest import run_benchmark
from tests.contract import rows

YAML = """
benchmark_name: batch-search
model: {preset: tiny-llama, dtype: fp32}
backends:
  - {name: hf}
  # 30 blocks of 128 tokens: one sequence of 40 tokens each. In the worker's process: each engine starts 19 s sooner.
  - {name: vllm, kv_cache_memory_bytes: 4000000, multiprocessing: false}
batch_sizes: auto
max_batch_size: 64
input_lengths: [32]
output_lengths: [8]
num_batches: 2
num_warmup_batches: 1
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch-search")
    yaml = tmp / "search.yaml"
    yaml.write_text(YAML)
    dry = run_benchmark(yaml, "--dry-run")
    proc = run_benchmark(yaml, "--output-dir", tmp / "out")
    return dry, proc, tmp / "out", yaml


def by_entry(out):
    results = rows(out / "results.csv")
    return {name: [r for r in results if r["backend"] == name] for name in ("hf", "vllm")}


@pytest.mark.engine
def test_the_dry_run_shows_where_each_search_starts(sweep):
    dry, *_ = sweep
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("search from bs 64, at most 64") == 2


@pytest.mark.engine
def test_vllm_is_bisected_down_to_what_its_cache_holds(sweep):
    _, proc, out, _ = sweep
    assert proc.returncode == 0, proc.stderr
    vllm = by_entry(out)["vllm"]
    probes = [(r["batch_size"], r["status"], r["max_batch"]) for r in vllm if r["search"] == "probe"]
    assert probes == [("64", "skipped", ""), ("32", "skipped", ""), ("16", "ok", ""), ("24", "ok", ""),
                      ("28", "ok", ""), ("30", "ok", "true"), ("31", "skipped", "")]
    assert "holds 30 blocks of 128 tokens; this batch needs 31" in vllm[-2]["error"]
    answer = vllm[-1]
    assert (answer["search"], answer["status"], answer["batch_size"], answer["max_batch_size_found"]) == \
        ("result", "ok", "", "30")
    assert answer["search_probes"] == "probes: 64 skipped, 32 skipped, 16 ok, 24 ok, 28 ok, 30 ok, 31 skipped"
    assert "[vllm] auto in=32 out=8 ok  largest batch that ran: 30" in proc.stdout


@pytest.mark.engine
def test_hf_stops_at_max_batch_size(sweep):
    _, proc, out, _ = sweep
    hf = by_entry(out)["hf"]
    assert [(r["batch_size"], r["status"], r["max_batch"], r["search"]) for r in hf] == [
        ("64", "ok", "true", "probe"), ("", "ok", "", "result")]
    assert hf[-1]["search_probes"] == "probes: 64 ok; stopped at the limit: max_batch_size 64"
    ran = hf[0]
    assert int(ran["num_batches"]) == 2 and float(ran["throughput_tokens_per_s"]) > 0
    assert int(ran["memory_before_load_bytes"]) < int(ran["peak_memory_bytes"])
    assert "64 (max)" in proc.stdout


@pytest.mark.engine
def test_the_report_shows_the_largest_batches_and_the_estimate_error(sweep):
    _, _, out, _ = sweep
    report = (out / "plots" / "report.md").read_text()
    largest = report[report.index("## Largest batch"):report.index("## Memory: estimate vs used")]
    assert "| hf | 32 | 8 | 64 |" in largest and "| vllm | 32 | 8 | 30 |" in largest
    estimate = report[report.index("## Memory: estimate vs used"):]
    assert "| hf | 1 |" in estimate and "| vllm | 4 |" in estimate


@pytest.mark.engine
def test_resume_runs_nothing_again(sweep):
    _, _, out, yaml = sweep
    before = rows(out / "results.csv")
    again = run_benchmark(yaml, "--output-dir", out, "--resume", "--no-plots")
    assert again.returncode == 0, again.stderr
    assert rows(out / "results.csv") == before
    assert "largest batch that ran" not in again.stdout.split("Results (")[0]  # no point line: nothing ran

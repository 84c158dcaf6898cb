"""Speculative decoding through benchmark.py: hf prompt lookup and vLLM n-gram, each against the same engine
without speculation, in one sweep (each engine starts once per entry); then vLLM n-gram in a request stream."""

import pytest

from harness.measure.writers import RESULT_COLUMNS
from tests.conftest import run_benchmark
from tests.contract import rows

# multiprocessing: false: fewer vLLM processes to start (about 19 s sooner in batch, 7 s in a stream, per entry).
VLLM = ("name: vllm, device: cpu, enforce_eager: true, kv_cache_memory_bytes: 268435456, cpu_threads_bind: all, "
        "cpu_reserved_cpus: 0, multiprocessing: false")
SPEC_LIST = "[null, {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 3}]"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spec")
    yaml = tmp / "spec.yaml"
    yaml.write_text(f"""
benchmark_name: spec-e2e
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
backends:
  - {{name: hf, device: cpu}}
  - {{name: hf, label: hf-lookup, device: cpu, speculative: {{method: prompt_lookup, num_speculative_tokens: 4}}}}
  - {{{VLLM}, speculative: {SPEC_LIST}}}
batch_sizes: [1, 4]
input_lengths: [32]
output_lengths: [16]
num_batches: 2
num_warmup_batches: 1
""")
    dry = run_benchmark(yaml, "--dry-run")
    proc = run_benchmark(yaml, "--output-dir", tmp / "out")
    return dry, proc, tmp / "out"


@pytest.mark.engine
def test_dry_run_shows_why_hf_skips_larger_batches(sweep):
    dry, _, _ = sweep
    assert dry.returncode == 0, dry.stderr
    lines = [line for line in dry.stdout.splitlines() if "hf-lookup" in line]
    assert any("bs 1" in line and "yes" in line for line in lines)
    assert any("bs 4" in line and "batch size 1" in line for line in lines)


@pytest.mark.engine
def test_rows_carry_the_engines_counters_and_the_comparison(sweep):
    _, proc, out = sweep
    assert proc.returncode == 0, proc.stderr
    results = {(r["backend"], int(r["batch_size"])): r for r in rows(out / "results.csv")}
    assert list(next(iter(results.values())).keys()) == RESULT_COLUMNS
    assert results[("hf-lookup", 4)]["status"] == "skipped"
    assert "batch size 1 only" in results[("hf-lookup", 4)]["error"]
    speculative = [results[("hf-lookup", 1)], results[("vllm-ngram4", 1)], results[("vllm-ngram4", 4)]]
    for r in speculative:
        assert r["status"] == "ok", r["error"]
        assert (r["spec_method"], r["spec_tokens"]) in (("prompt_lookup", "4"), ("ngram", "4"))
        proposed, accepted = int(r["draft_tokens_proposed"]), int(r["draft_tokens_accepted"])
        assert 0 < proposed and 0 <= accepted <= proposed
        assert float(r["acceptance_rate"]) == pytest.approx(accepted / proposed, rel=1e-4)
        assert 1 <= float(r["mean_accepted_length"]) <= 5
        assert r["spec_baseline"] == r["backend"].split("-")[0]
        base = results[(r["spec_baseline"], int(r["batch_size"]))]
        assert float(r["speedup_vs_baseline"]) == pytest.approx(
            float(base["tpot_ms_mean"]) / float(r["tpot_ms_mean"]), rel=1e-3)
        assert r["tokens_identical_share"] != ""
    # Greedy prompt lookup in transformers verifies with the same forward as plain decoding: nothing may change.
    assert float(results[("hf-lookup", 1)]["tokens_identical_share"]) == 1.0
    for plain in ("hf", "vllm"):
        assert results[(plain, 1)]["spec_method"] == results[(plain, 1)]["acceptance_rate"] == ""
    samples = [s for s in rows(out / "samples.csv") if s["backend"] == "vllm-ngram4" and s["batch_size"] == "4"]
    assert len(samples) == 2
    assert sum(int(s["draft_tokens_accepted"]) for s in samples) == int(results[("vllm-ngram4", 4)]
                                                                        ["draft_tokens_accepted"])


@pytest.mark.engine
def test_summary_report_and_charts_show_speculation(sweep):
    _, proc, out = sweep
    assert "Speculative decoding (vs the same engine without it)" in proc.stdout
    report = (out / "plots" / "report.md").read_text()
    assert "## Speculative decoding" in report and "### ngram" in report and "### prompt_lookup" in report
    for chart in ("spec_speedup_vs_batch_size.png", "spec_acceptance_vs_batch_size.png"):
        assert (out / "plots" / chart).stat().st_size > 10_000


@pytest.mark.engine
def test_vllm_counts_speculation_in_a_request_stream(tmp_path):
    yaml = tmp_path / "stream.yaml"
    yaml.write_text(f"""
benchmark_name: spec-stream
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
scenario: stream
backends:
  - {{{VLLM}, label: vllm-ngram, speculative: {{method: ngram, num_speculative_tokens: 3}}}}
  - {{name: hf, device: cpu, speculative: {{method: prompt_lookup, num_speculative_tokens: 3}}}}
input_lengths: [24]
output_lengths: [12]
stream: {{arrival: poisson, request_rates: [16], num_requests: 12, num_warmup_requests: 2}}
""")
    proc = run_benchmark(yaml, "--output-dir", tmp_path / "out", "--no-plots")
    assert proc.returncode == 0, proc.stderr
    results = {r["backend"]: r for r in rows(tmp_path / "out" / "results.csv")}
    ngram = results["vllm-ngram"]
    assert ngram["status"] == "ok", ngram["error"]
    assert 0 <= int(ngram["draft_tokens_accepted"]) <= int(ngram["draft_tokens_proposed"])
    assert int(ngram["draft_tokens_proposed"]) > 0 and int(ngram["draft_steps"]) > 0
    assert ngram["spec_baseline"] == ngram["speedup_vs_baseline"] == ""  # no entry without speculation
    assert results["hf"]["status"] == "skipped" and "scenario: batch only" in results["hf"]["error"]

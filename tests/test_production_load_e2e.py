"""Production-shaped load end to end through benchmark.py (docs/measurement.md, "Trace replay", "Shared prefixes",
"Multi-turn conversations"): a trace replayed, and multi-turn conversations, on HF continuous batching, vLLM in
process and vLLM behind its OpenAI-compatible server; shared prefixes on vLLM with prefix caching on and off.

Each sweep starts its engines once and every test of it reads its output folder.
"""

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_benchmark
from tests.contract import MARKER, processes_with, rows
from tests.replay import TRACE_INPUTS, TRACE_OUTPUTS, TRACE_TIMES_S, write_small_trace

# The server's model runs in its engine core's process (vLLM's VLLM_ENABLE_V1_MULTIPROCESSING=0): 7 s sooner a start
# here. tests/test_stream_e2e.py keeps vLLM's own processes.
SERVER = ("env VLLM_ENABLE_V1_MULTIPROCESSING=0 {python} -m vllm.entrypoints.openai.api_server --model {model_dir} --load-format dummy --dtype float32 "
          "--enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 --port {port} --max-model-len 512 "
          "--disable-uvicorn-access-log")
# Fewer vLLM processes to start (multiprocessing: false): 19 s sooner per batch entry, 7 s per stream entry.
VLLM = "name: vllm, enforce_eager: true, kv_cache_memory_bytes: 268435456, multiprocessing: false"
TIME_SCALE = 0.5
REPO = Path(__file__).resolve().parent.parent


def run_sweep(folder, body: str, scenario: str = "stream"):
    (folder / "sweep.yaml").write_text("model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
                                       f"scenario: {scenario}\n" + body)
    env = {**os.environ, MARKER: uuid.uuid4().hex}
    proc = run_benchmark(folder / "sweep.yaml", "--output-dir", folder / "out", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert processes_with(env[MARKER]) == []  # every worker, engine and server the sweep started is gone
    return folder / "out"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    write_small_trace(folder)
    return run_sweep(folder, f"""benchmark_name: trace-e2e
backends:
  - {{name: hf, label: hf-continuous, device: cpu, batching: continuous, max_batch_size: 4}}
  - {{{VLLM}}}
  - {{name: openai, label: vllm-serve, command: '{SERVER}'}}
stream: {{arrival: trace, trace: small-azure.csv, time_scale: {TIME_SCALE}, num_warmup_requests: 2}}
""")


LABELS = ("hf-continuous", "vllm", "vllm-serve")


@pytest.mark.engine
def test_trace_gives_one_row_per_engine(replayed):
    results = rows(replayed / "results.csv")
    assert [r["backend"] for r in results] == list(LABELS)
    for r in results:
        assert (r["status"], r["num_requests"], r["requests_failed"]) == ("ok", "10", "0"), r
        assert r["workload"] == "random, trace small-azure.csv x0.5"
        assert (int(r["input_length"]), int(r["output_length"])) == (max(TRACE_INPUTS), max(TRACE_OUTPUTS))
        assert float(r["request_rate"]) == pytest.approx(9 / (0.9 * TIME_SCALE))  # what the window offers


@pytest.mark.engine
def test_every_request_at_its_traced_time_with_its_traced_lengths(replayed):
    results = {r["backend"]: r for r in rows(replayed / "results.csv")}
    requests = rows(replayed / "requests.csv")
    for label in LABELS:
        mine = [q for q in requests if q["backend"] == label]
        assert [float(q["scheduled_s"]) for q in mine] == pytest.approx([t * TIME_SCALE for t in TRACE_TIMES_S],
                                                                          abs=1e-6)
        # each request left the client within the slip the point reports
        slips = [(float(q["dispatched_s"]) - float(q["scheduled_s"])) * 1e3 for q in mine]
        assert slips == pytest.approx([float(q["send_slip_ms"]) for q in mine], abs=1e-3)
        assert float(results[label]["send_slip_ms_p99"]) == pytest.approx(float(np.percentile(slips, 99)), abs=1e-3)
        assert [int(q["input_tokens"]) for q in mine] == list(TRACE_INPUTS), label
        assert [int(q["output_tokens"]) for q in mine] == list(TRACE_OUTPUTS), label


@pytest.mark.engine
def test_manifest_names_the_trace(replayed):
    trace = json.loads((replayed / "manifest.json").read_text())["workload"]["trace"]
    assert (trace["format"], trace["requests_replayed"], trace["time_scale"]) == ("azure", 10, TIME_SCALE)
    assert trace["file"].endswith("small-azure.csv") and trace["note"] == ""


PREFIX_TOKENS, OWN_TOKENS = 300, 32


@pytest.fixture(scope="module")
def prefixed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prefix")
    return run_sweep(folder, f"""benchmark_name: prefix-e2e
backends:
  - {{{VLLM}, label: vllm-cache, enable_prefix_caching: true}}
  - {{{VLLM}, label: vllm-no-cache}}
workload: {{prompts: random, prefix: {{num_prefixes: 2, prefix_tokens: {PREFIX_TOKENS}}}}}
input_lengths: [{OWN_TOKENS}]
output_lengths: [4]
stream: {{arrival: constant, request_rates: [8], num_requests: 16, num_warmup_requests: 2}}
""")


@pytest.mark.engine
def test_prefix_cache_hit_rate_is_the_prefixes_full_blocks(prefixed):
    """Both prefixes are cached by the two warm-up requests; vLLM then serves each timed prompt's full blocks of
    prefix from the cache (blocks of 128 tokens here: 256 of the 300 prefix tokens), never its own tokens."""
    manifest = json.loads((prefixed / "manifest.json").read_text())
    block = manifest["backends"][0]["runtime"]["block_size"]
    cached = PREFIX_TOKENS // block * block
    results = {r["backend"]: r for r in rows(prefixed / "results.csv")}
    on, off = results["vllm-cache"], results["vllm-no-cache"]
    assert (on["prefix_caching"], off["prefix_caching"]) == ("True", "False")
    assert float(on["input_tokens_mean"]) == PREFIX_TOKENS + OWN_TOKENS
    assert float(on["prefix_cache_hit_rate"]) == pytest.approx(cached / (PREFIX_TOKENS + OWN_TOKENS))
    assert float(off["prefix_cache_hit_rate"]) == 0
    requests = rows(prefixed / "requests.csv")
    assert {int(q["cached_tokens"]) for q in requests if q["backend"] == "vllm-cache"} == {cached}
    assert {int(q["cached_tokens"]) for q in requests if q["backend"] == "vllm-no-cache"} == {0}


@pytest.mark.engine
def test_prefix_caching_chart_and_report_line(prefixed):
    results = {r["backend"]: r for r in rows(prefixed / "results.csv")}
    report = (prefixed / "plots" / "report.md").read_text()
    on, off = (float(results[k]["ttft_ms_p50"]) for k in ("vllm-cache", "vllm-no-cache"))
    assert "### Prefix caching" in report
    assert (f"with prefix caching (vllm-cache, hit rate {float(results['vllm-cache']['prefix_cache_hit_rate']):.0%})"
            in report)
    assert f"without (vllm-no-cache), {on / off:.2f}x;" in report
    assert (prefixed / "plots" / f"stream_prefix_in{OWN_TOKENS}_out4.png").exists()


TURN_GAP_S = 0.05


@pytest.fixture(scope="module")
def conversed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("turns")
    return run_sweep(folder, f"""benchmark_name: turns-e2e
backends:
  - {{name: hf, label: hf-continuous, device: cpu, batching: continuous, max_batch_size: 4}}
  - {{{VLLM}}}
  - {{name: openai, label: vllm-serve, command: '{SERVER}'}}
workload: {{prompts: {REPO}/yamls/prompts/example-conversations.jsonl, template: chat, multi_turn: true,
            turn_gap_s: {TURN_GAP_S}}}
output_lengths: [8]
stream: {{arrival: poisson, request_rates: [4], num_requests: 4, num_warmup_requests: 2}}
""")


TURN_LABELS = ("hf-continuous", "vllm", "vllm-serve")


@pytest.mark.engine
def test_every_turn_carries_its_history_and_the_answers(conversed):
    """Turn k + 1 is sent with turn k's prompt, its 8 answer tokens and its own tokens, due 50 ms after turn k's last
    token; the same conversations, turn for turn, on every engine (vllm serve returns the answer's token ids)."""
    results = {r["backend"]: r for r in rows(conversed / "results.csv")}
    requests = rows(conversed / "requests.csv")
    turns = None
    for label in TURN_LABELS:
        assert results[label]["status"] == "ok" and results[label]["num_conversations"] == "4", results[label]
        mine = [q for q in requests if q["backend"] == label]
        assert int(results[label]["num_requests"]) == len(mine) > 4
        assert turns in (None, [(q["conversation"], q["turn"]) for q in mine])
        turns = [(q["conversation"], q["turn"]) for q in mine]
        for before, q in zip(mine, mine[1:]):
            if q["turn"] == "1":
                continue
            assert q["conversation"] == before["conversation"] and int(q["turn"]) == int(before["turn"]) + 1
            grown = int(q["context_tokens"]) - int(before["context_tokens"]) - int(before["output_tokens"])
            assert 0 < grown < 60  # this turn's own tokens
            assert int(q["context_tokens"]) == int(q["input_tokens"])
            # Both read from requests.csv, each rounded to 6 significant digits: 5e-6 apiece past 1 s.
            assert float(q["scheduled_s"]) == pytest.approx(float(before["last_token_s"]) + TURN_GAP_S, rel=1e-5,
                                                            abs=1e-6)
    own = {}  # each turn's own tokens are the same on every engine
    for q in requests:
        if q["turn"] != "1":
            before = next(b for b in requests if b["backend"] == q["backend"] and b["conversation"] ==
                          q["conversation"] and int(b["turn"]) == int(q["turn"]) - 1)
            grown = int(q["context_tokens"]) - int(before["context_tokens"]) - int(before["output_tokens"])
            assert own.setdefault((q["conversation"], q["turn"]), grown) == grown


@pytest.mark.engine
def test_ttft_vs_context_chart(conversed):
    results = rows(conversed / "results.csv")
    assert (conversed / "plots" / f"stream_turns_in{results[0]['input_length']}_out8.png").exists()


@pytest.fixture(scope="module")
def prefixed_batches(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prefix-batches")
    return run_sweep(folder, f"""benchmark_name: prefix-batches-e2e
backends: [{{{VLLM}, label: vllm-cache, enable_prefix_caching: true}}]
workload: {{prompts: random, prefix: {{num_prefixes: 2, prefix_tokens: {PREFIX_TOKENS}}}}}
input_lengths: [{OWN_TOKENS}]
output_lengths: [4]
batch_sizes: [4]
num_batches: 2
num_warmup_batches: 1
""", scenario="batch")


@pytest.mark.engine
def test_batch_points_report_the_hit_rate_too(prefixed_batches):
    """The warm-up batch caches both prefixes (sequence k gets prefix k mod 2); every timed sequence then reads their
    full blocks from the cache."""
    (row,) = rows(prefixed_batches / "results.csv")
    assert (row["scenario"], row["status"]) == ("batch", "ok")
    block = json.loads((prefixed_batches / "manifest.json").read_text())["backends"][0]["runtime"]["block_size"]
    expected = PREFIX_TOKENS // block * block / (PREFIX_TOKENS + OWN_TOKENS)
    assert float(row["prefix_cache_hit_rate"]) == pytest.approx(expected)

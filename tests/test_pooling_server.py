"""Embeddings and rerank against a real vLLM pooling server on 127.0.0.1 (tiny-llama as an embedding model, dummy
weights), started and stopped by the backend: yamls/cpu-embeddings.yaml's entries sent to it through benchmark.py,
their rows, requests, charts and report checked (docs/measurement.md, "Embeddings and rerank")."""

import csv
import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO
from tests.test_openai_server import TOKENIZER_VOCAB, make_backend, sweep_on_server

# vLLM as a pooling model: the last token's hidden state, normalized; one server answers /v1/embeddings and
# /v1/rerank (a bi-encoder's cosine). The model in the engine core's process: the server starts sooner.
POOLING_COMMAND = (
    "env VLLM_ENABLE_V1_MULTIPROCESSING=0 {python} -m vllm.entrypoints.openai.api_server --model {model_dir} "
    "--load-format dummy --dtype float32 --enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 "
    "--port {port} --max-model-len 512 --disable-uvicorn-access-log --runner pooling --convert embed"
)
INPUTS = (1, 4)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """yamls/cpu-embeddings.yaml's embeddings and rerank entries (1 and 4 inputs per request) sent to one pooling
    server: the output folder and the run."""
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    served = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32", overrides={"vocab_size": TOKENIZER_VOCAB}))
    backend = make_backend(served, command=POOLING_COMMAND)
    folder = tmp_path_factory.mktemp("pooling")
    config = yaml.safe_load((REPO / "yamls" / "cpu-embeddings.yaml").read_text())
    assert config["model"]["overrides"] == {"vocab_size": TOKENIZER_VOCAB}  # the server's model
    for entry in config["backends"]:
        entry["grid"] = {"inputs_per_request": INPUTS}
    config["stream"].update(request_rates=[8], num_requests=12, num_warmup_requests=1)
    result = sweep_on_server(backend, config, folder)
    return folder / "out", result


@pytest.mark.engine
def test_each_point_reports_what_it_took_in_and_its_latency(sweep):
    out, result = sweep
    rows = {r["backend"]: r for r in csv.DictReader(open(out / "results.csv"))}
    assert sorted(rows) == sorted(f"{api}[inputs_per_request={k}]" for api in ("embeddings", "rerank") for k in INPUTS)
    for label, row in rows.items():
        k = int(label.split("=")[1].rstrip("]"))
        assert row["status"] == "ok" and row["output_length"] == "0" and row["requests_failed"] == "0"
        assert float(row["inputs_per_request"]) == k
        rate = float(row["achieved_request_rate"])
        assert float(row["inputs_per_s"]) == pytest.approx(k * rate, rel=1e-4)  # as written: rounded
        assert float(row["input_tokens_per_s"]) == pytest.approx(float(row["input_tokens_mean"]) * rate, rel=1e-4)
        assert 0 < float(row["e2e_ms_p50"]) <= float(row["e2e_ms_p99"])
        # an answer that comes whole: no first token apart from it, no output
        for column in ("ttft_ms_p50", "tpot_ms_p50", "itl_ms_p50", "throughput_tokens_per_s",
                       "output_tokens_per_s_per_user"):
            assert row[column] == "", (label, column)
        assert row["output_tokens_source"] == "none"
    printed = " ".join(result.stdout.split())  # the console wraps long lines
    assert "in=64 out=0 ok e2e p50" in printed and "inputs/s" in printed and "input tok/s" in printed


@pytest.mark.engine
def test_the_server_counts_what_each_request_carried(sweep):
    out, _ = sweep
    requests = list(csv.DictReader(open(out / "requests.csv")))
    assert len(requests) == 4 * 12 and all(r["error"] == "" for r in requests)
    for r in requests:
        k = int(r["inputs"])
        assert r["backend"].endswith(f"={k}]") and r["output_tokens"] == "0" and r["ttft_ms"] == r["e2e_ms"]
        if r["backend"].startswith("embeddings"):
            assert int(r["input_tokens"]) == 64 * k  # token ids, counted as sent
        else:  # text the server re-tokenizes: its query once and each document, each about half a prompt, with BOS
            assert 32 * (1 + k) * 0.5 < int(r["input_tokens"]) < 40 * (1 + k) * 1.5


@pytest.mark.engine
def test_charts_report_and_best_answer_rank_by_input_tokens(sweep):
    out, _ = sweep
    report = (out / "plots" / "report.md").read_text()
    assert "### Inputs of 64 tokens, no output (embeddings, rerank), no concurrency cap" in report
    assert "| points ok | highest sustained rate (requests/s) | inputs per request | latency p50 (ms) |" in report
    assert "## Stream: input throughput vs request rate" in report and "## Stream: latency distribution" in report
    rows = list(csv.DictReader(open(out / "results.csv")))
    fastest = max(rows, key=lambda r: float(r["input_tokens_per_s"]))
    best = json.loads(subprocess.run([sys.executable, "-m", "plots", str(out), "--best", "--format", "json"],
                                     cwd=REPO, capture_output=True, text=True, check=True).stdout)
    (answer,) = best
    assert answer["best"]["configuration"] == fastest["backend"]
    assert answer["best"]["input_tokens_per_s_per_gpu"] == pytest.approx(float(fastest["input_tokens_per_s"]))
    assert list(answer["best"]["judged"]) == ["latency p90"]  # the sweep's SLO: ttft_ms bounds the whole latency
    for chart in ("stream_latency_vs_rate_in64_out0.png", "stream_throughput_vs_rate_in64_out0.png",
                  "stream_ttft_cdf_in64_out0.png"):
        assert (out / "plots" / chart).stat().st_size > 10_000

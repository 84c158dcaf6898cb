"""Request streams end to end through benchmark.py: HF static and continuous batching, vLLM in process and vLLM
behind its OpenAI-compatible server (started and stopped by the harness), on one seeded stream.

One sweep serves most checks (each engine starts once); the resume, rate-search and dying-server sweeps run the null
engine (backends/synthetic.py), which answers each request after set sleeps: what they test is the harness's.
"""

import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from harness.measure.writers import REQUEST_COLUMNS, RESULT_COLUMNS
from harness.scenarios.stream import SERVER_SERIES
from tests.conftest import REPO, run_benchmark
from tests.contract import MARKER, processes_with, remove_orphaned_shm, rows, run_marked, shm_held

SERVER = ("{python} -m vllm.entrypoints.openai.api_server --model {model_dir} --load-format dummy --dtype float32 "
          "--enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 --port {port} --max-model-len 512 "
          "--disable-uvicorn-access-log")
HF_STATIC = "{name: hf, label: hf-static, device: cpu, batching: static, max_batch_size: 4, max_wait_ms: 20}"
SYNTHETIC = "{name: synthetic}"
NUM_REQUESTS = 16


def stream_yaml(path, backends: str, rates="[8, 32]", extra=""):
    path.write_text(f"""
benchmark_name: stream-e2e
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
scenario: stream
backends: [{backends}]
input_lengths: [24]
output_lengths: [8]
stream:
  arrival: poisson
  request_rates: {rates}
  num_requests: {NUM_REQUESTS}
  num_warmup_requests: 2
  seed: 3
  slo: {{ttft_ms: 1000, tpot_ms: 100, percentile: 90}}
{extra}""")
    return path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stream")
    # vLLM's model in its engine core's process, in process and behind its server (7 s sooner each here); vLLM's own
    # processes are kept by the dying server below and by tests/test_vllm_stream.py's engine.
    backends = ", ".join([
        HF_STATIC,
        "{name: hf, label: hf-continuous, device: cpu, batching: continuous, max_batch_size: 4}",
        "{name: vllm, enforce_eager: true, kv_cache_memory_bytes: 268435456, multiprocessing: false}",
        f"{{name: openai, label: vllm-serve, command: 'env VLLM_ENABLE_V1_MULTIPROCESSING=0 {SERVER}', "
        "metrics_interval_s: 0.1}",
    ])
    stream_yaml(tmp / "sweep.yaml", backends)
    env = {**os.environ, MARKER: uuid.uuid4().hex}
    proc = run_benchmark(tmp / "sweep.yaml", "--output-dir", tmp / "out", env=env)
    return proc, tmp / "out", env[MARKER]


LABELS = ("hf-static", "hf-continuous", "vllm", "vllm-serve")


@pytest.mark.engine
def test_the_best_rate_at_the_slo_is_the_same_in_console_report_and_json(sweep, capsys):
    """A rate sweep against a server and three engines, held to its own stream.slo (plots/best/): the console's
    last lines, `python -m plots --best` in text and JSON, report.md's first section and report.html's panel give one
    answer."""
    import html
    import json

    from plots.__main__ import main as plots_main

    proc, out, _ = sweep
    printed = proc.stdout[proc.stdout.index("Best configuration at the targets"):].splitlines()
    assert printed[0] == ("Best configuration at the targets (TTFT p90 <= 1,000 ms, TPOT p90 <= 100 ms; the "
                          "sweep's own):")
    assert plots_main([str(out), "--best"]) == 0
    assert capsys.readouterr().out.splitlines() == printed[:2]
    assert plots_main([str(out), "--best", "--format", "json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)
    assert (answer["scenario"], answer["input_length"], answer["targets_from"]) == ("stream", 24, "the sweep's own")
    if answer["best"] is not None:  # which engine wins on two shared cores is not the subject; that all agree is
        assert f": {answer['best']['configuration']} at {answer['best']['load']}," in printed[1]
        assert f"| {answer['best']['configuration']} | {answer['best']['load']} |" in (
            out / "plots" / "report.md").read_text()
    else:
        assert "no point meets the targets" in printed[1]
    assert f"<li>{html.escape(printed[1].strip())}</li>" in (out / "plots" / "report.html").read_text()


@pytest.mark.engine
def test_every_engine_ran_every_rate(sweep):
    proc, out, marker = sweep
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = rows(out / "results.csv")
    assert list(results[0]) == RESULT_COLUMNS
    assert [(r["backend"], float(r["request_rate"])) for r in results] == [
        (label, rate) for label in LABELS for rate in (8.0, 32.0)]
    for r in results:
        assert (r["status"], r["scenario"], r["batch_size"], r["latency_ms_mean"]) == ("ok", "stream", "", ""), r
        assert int(r["num_requests"]) == NUM_REQUESTS and int(r["num_warmup_requests"]) == 2
    batching = {r["backend"]: r["batching"] for r in results}
    assert batching == {"hf-static": "static", "hf-continuous": "continuous", "vllm": "continuous",
                        "vllm-serve": "server"}
    assert processes_with(marker) == []  # workers, engines and the server the harness started are all gone


@pytest.mark.engine
def test_request_rows_are_complete_in_order_and_add_up(sweep):
    _, out, _ = sweep
    requests = rows(out / "requests.csv")
    assert list(requests[0]) == REQUEST_COLUMNS
    results = rows(out / "results.csv")
    for r in results:
        mine = [q for q in requests if q["backend"] == r["backend"] and q["request_rate"] == r["request_rate"]]
        assert [int(q["request_index"]) for q in mine] == list(range(NUM_REQUESTS))
        scheduled = [float(q["scheduled_s"]) for q in mine]
        assert scheduled[0] == 0 and scheduled == sorted(scheduled)
        for q in mine:
            t = [float(q[k]) for k in ("scheduled_s", "dispatched_s", "sent_s", "first_token_s", "last_token_s")]
            assert t == sorted(t), q
            assert float(q["ttft_ms"]) == pytest.approx((t[3] - t[0]) * 1e3, abs=0.01)
            assert float(q["e2e_ms"]) == pytest.approx((t[4] - t[0]) * 1e3, abs=0.01)
            assert (int(q["input_tokens"]), int(q["output_tokens"])) == (24, 8)
            met = float(q["ttft_ms"]) <= 1000 and float(q["tpot_ms"]) <= 100
            assert int(q["met_slo"]) == met
        met_share = sum(int(q["met_slo"]) for q in mine) / NUM_REQUESTS
        duration = max(float(q["last_token_s"]) for q in mine)
        assert float(r["slo_attainment"]) == pytest.approx(met_share)
        assert float(r["duration_s"]) == pytest.approx(duration, rel=1e-4)
        assert float(r["goodput"]) == pytest.approx(met_share * NUM_REQUESTS / duration, rel=1e-4)
        assert float(r["throughput_tokens_per_s"]) == pytest.approx(8 * NUM_REQUESTS / duration, rel=1e-4)


@pytest.mark.engine
def test_every_engine_was_offered_the_same_stream(sweep):
    _, out, _ = sweep
    requests = rows(out / "requests.csv")
    by_engine = {label: [q["scheduled_s"] for q in requests if q["backend"] == label and q["request_rate"] == "8"]
                 for label in LABELS}
    assert len({tuple(v) for v in by_engine.values()}) == 1
    at_32 = [float(q["scheduled_s"]) for q in requests if q["backend"] == "vllm" and q["request_rate"] == "32"]
    assert at_32 == pytest.approx([float(s) / 4 for s in by_engine["vllm"]], abs=1e-5)  # same draws, 4x the rate


@pytest.mark.engine
def test_greedy_tokens_agree_between_hf_static_and_continuous(sweep):
    _, out, _ = sweep
    shares = {r["backend"]: r["tokens_identical_share"] for r in rows(out / "results.csv")}
    assert float(shares["hf-continuous"]) == 1.0  # same weights as hf-static, the reference entry


@pytest.mark.engine
def test_the_servers_own_metrics_beside_its_rows(sweep):
    """vllm-serve's points carry vLLM's own figures, and a file of the series scraped every 0.1 s; the in-process
    engines have none. The gauges are mostly 0 here (a request takes ~15 ms), the counters are exact: each timed
    request asks the prefix cache about its 24 prompt tokens, and random prompts share no prefix."""
    _, out, _ = sweep
    served = []
    for r in rows(out / "results.csv"):
        if r["backend"] != "vllm-serve":
            assert r["server_metrics_file"] == r["server_kv_cache_usage_max"] == "", r
            continue
        assert r["server_preemptions"] == "0" and 0 <= float(r["server_kv_cache_usage_max"]) <= 1
        assert float(r["server_requests_running_max"]) >= 0 and float(r["server_prefix_cache_hit_rate"]) == 0
        series = rows(out / r["server_metrics_file"])
        assert list(series[0]) == ["t_s", *SERVER_SERIES] and len(series) >= 3
        assert float(series[0]["t_s"]) < 0 < float(series[-1]["t_s"])  # before the first request, after the last
        queried = float(series[-1]["prefix_cache_queries"]) - float(series[0]["prefix_cache_queries"])
        assert queried == NUM_REQUESTS * 24
        served.append(r)
    assert len(served) == 2


@pytest.mark.engine
def test_stream_charts_and_report(sweep):
    _, out, _ = sweep
    charts = {p.name for p in (out / "plots").iterdir()}
    for stem in ("stream_latency_vs_rate", "stream_throughput_vs_rate", "stream_goodput_vs_rate", "stream_ttft_cdf",
                 "stream_server"):
        assert f"{stem}_in24_out8.png" in charts
    report = (out / "plots" / "report.md").read_text()
    assert "## Request streams" in report and "Static vs continuous batching" in report


@pytest.mark.engine
def test_resume_runs_only_the_new_rates(tmp_path):
    config = stream_yaml(tmp_path / "s.yaml", SYNTHETIC, rates="[8]")
    out = tmp_path / "out"
    first, _ = run_marked(config, "--output-dir", out)
    assert first.returncode == 0, first.stderr
    stream_yaml(config, SYNTHETIC, rates="[8, 16]")
    second, _ = run_marked(config, "--output-dir", out, "--resume")
    assert second.returncode == 0, second.stderr
    assert [r["request_rate"] for r in rows(out / "results.csv")] == ["8", "16"]
    assert len(rows(out / "requests.csv")) == 2 * NUM_REQUESTS


@pytest.mark.engine
def test_resume_refuses_another_stream(tmp_path):
    config = stream_yaml(tmp_path / "s.yaml", SYNTHETIC, rates="[8]")
    out = tmp_path / "out"
    assert run_marked(config, "--output-dir", out)[0].returncode == 0
    config.write_text(config.read_text().replace("seed: 3", "seed: 4"))
    proc, _ = run_marked(config, "--output-dir", out, "--resume")
    assert proc.returncode == 2
    assert "--resume: " in proc.stderr and "stream.seed=3" in proc.stderr and "has 4" in proc.stderr


@pytest.mark.engine
def test_rate_search_reports_every_probe_and_the_highest_sustained_rate(tmp_path):
    search = "  search: {start_rate: 4, max_probes: 4}\n"
    config = stream_yaml(tmp_path / "s.yaml", SYNTHETIC, rates="auto", extra=search)
    proc, _ = run_marked(config, "--output-dir", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    results = rows(tmp_path / "out" / "results.csv")
    probes, (result,) = results[:-1], results[-1:]
    assert [r["search"] for r in probes] == ["probe"] * len(probes) and result["search"] == "result"
    assert 2 <= len(probes) <= 4 and float(probes[0]["request_rate"]) == 4.0
    met = [float(r["request_rate"]) for r in probes if float(r["slo_attainment"]) * 100 >= 90]
    expected = max(met) if met else None
    assert (float(result["max_rate_within_slo"]) if result["max_rate_within_slo"] else None) == expected
    assert result["request_rate"] == "" and result["search_probes"].startswith("probes: 4/s ")
    assert "highest rate within the SLO" in proc.stdout


def _server_port(marker: str, deadline_s: float) -> int:
    """The port of the vLLM server a sweep started (found by the marker its environment inherits), once healthy."""
    while time.monotonic() < deadline_s:
        for pid in processes_with(marker):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"vllm.entrypoints.openai.api_server" in cmdline:
                port = int(cmdline[cmdline.index(b"--port") + 1])
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                    return int(pid), port
                except OSError:
                    pass
        time.sleep(0.5)
    raise AssertionError("the sweep's server never became healthy")


@pytest.mark.engine
def test_a_server_that_dies_mid_point_costs_its_rows_and_the_sweep_goes_on(tmp_path):
    backends = f"{{name: openai, label: vllm-serve, command: '{SERVER}'}}, {SYNTHETIC}"
    config = stream_yaml(tmp_path / "s.yaml", backends, rates="[4, 8]")
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    held = set()  # the server's /dev/shm segments, read just before it is killed
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(config), "--output-dir",
                             str(tmp_path / "out"), "--no-plots"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        pid, _ = _server_port(marker, time.monotonic() + 300)
        time.sleep(2.0)  # into the first point: 2 warm-up requests, then 16 timed ones at 4/s
        held = shm_held(processes_with(marker))
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # the server and its engine, as an OOM killer would
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
        remove_orphaned_shm(held)  # what the killed engine's queues held
    assert proc.returncode == 1, stdout[-2000:] + stderr[-2000:]  # a point errored
    status = {(r["backend"], r["request_rate"]): (r["status"], r["error"]) for r in rows(tmp_path / "out" / "results.csv")}
    assert status[("vllm-serve", "4")][0] == status[("vllm-serve", "8")][0] == "error"
    assert re.search(r"requests failed|Connect|connection", status[("vllm-serve", "4")][1]), status
    assert status[("synthetic", "4")] == status[("synthetic", "8")] == ("ok", "")  # the sweep went on
    assert processes_with(marker) == []
    assert "the server was killed by SIGKILL during the sweep" in status[("vllm-serve", "8")][1]
    # The point it died in keeps the requests it timed (those after the kill with their error), unless it died in
    # the warm-up; the next point timed none.
    served = [r for r in rows(tmp_path / "out" / "requests.csv") if r["backend"] == "vllm-serve"]
    assert all(r["request_rate"] == "4" for r in served)
    assert not served or any(r["error"] for r in served)
    assert math.isfinite(float(rows(tmp_path / "out" / "results.csv")[-1]["goodput"]))

"""Faults are data, not hangs: requests a server breaks (a dropped connection, 500, 429, malformed SSE, a stall
past request_timeout_s, the server dying) are recorded as failed with their reason, counted, and left out of
the latencies; the point is ok while they stay within stream.max_failed_share. Against scripts/loopback_server.py
on loopback, started and stopped by the openai backend."""

import math
import os
import time
import uuid

import numpy as np
import pytest

from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from tests.conftest import REPO, run_benchmark
from tests.contract import MARKER, processes_with, rows

FAULT_SERVER = f"{{python}} {REPO / 'scripts' / 'loopback_server.py'} --port {{port}}"
KINDS = ("close", "500", "429", "malformed", "stall")
REASONS = {  # what each fault's request says, in requests.csv and the point's error
    "close": "connection",  # aiohttp's "Response payload is not completed", or the harness's "connection closed"
    "500": "HTTP 500 from ",
    "429": "HTTP 429 from ",
    "malformed": "malformed SSE data (not JSON)",
    "stall": "no complete response within request_timeout_s (2 s)",
}


def backend_for(command: str) -> OpenAIBackend:
    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    options = OpenAIOptions(name="openai", command=command, request_timeout_s=2.0)
    options.validate("backends[0]")
    return OpenAIBackend(options, model, SweepShape(0, 64, 8, scenario="stream"))


@pytest.mark.engine
def test_each_fault_is_one_failed_request_with_its_reason():
    """Requests 50 ms apart (each answered in ~10 ms): the server sees them in index order, and every 2nd breaks."""
    backend = backend_for(FAULT_SERVER + " --faults " + ",".join(KINDS) + " --every 2")
    backend.load()
    try:
        n = 2 * len(KINDS)
        prompts = np.random.default_rng(0).integers(3, 32000, size=(n, 8)).tolist()
        stream = StreamSpec(BatchSpec(prompts, (4,) * n), arrival_times("constant", 20.0, n, 0))
        start = time.monotonic()
        timing = backend.serve(stream)
        assert time.monotonic() - start < 2.0 + 5  # the stall costs request_timeout_s, nothing hangs
    finally:
        backend.close()
    for r in timing.requests:
        if r.index % 2 == 0:
            assert r.ok and r.output_tokens == 4 and r.output_tokens_source == "usage", r.error
            continue
        kind = KINDS[r.index // 2]
        assert not r.ok and REASONS[kind] in r.error and "\n" not in r.error, (kind, r.error)


def fault_yaml(path, faults: str, share: float, rates="[4]", extra_backends=""):
    server = FAULT_SERVER + " " + faults
    path.write_text(f"""
benchmark_name: faults
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
scenario: stream
backends: [{{name: openai, label: faulty, command: "{server}", request_timeout_s: 2}}{extra_backends}]
input_lengths: [16]
output_lengths: [4]
stream: {{arrival: constant, request_rates: {rates}, num_requests: 12, num_warmup_requests: 2, seed: 0,
          max_failed_share: {share}}}
""")
    return path


@pytest.mark.engine
@pytest.mark.parametrize("share,status", [(0.25, "ok"), (0.0, "error")])
def test_a_point_is_ok_while_failures_stay_within_max_failed_share(tmp_path, share, status):
    """3 of 12 timed requests break (every 4th after the 2 warm-up ones): ok at 0.25, an error at 0."""
    config = fault_yaml(tmp_path / "f.yaml", "--faults 500,close,malformed --every 4 --skip 2", share)
    marker = uuid.uuid4().hex
    proc = run_benchmark(config, "--output-dir", tmp_path / "out", "--no-plots", env={**os.environ, MARKER: marker})
    assert proc.returncode == (0 if status == "ok" else 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = rows(tmp_path / "out" / "results.csv")
    assert row["status"] == status and int(row["requests_failed"]) == 3 and int(row["num_requests"]) == 12
    requests = rows(tmp_path / "out" / "requests.csv")  # kept either way: what was measured is not lost
    failed = [r for r in requests if r["error"]]
    assert [int(r["request_index"]) for r in failed] == [3, 7, 11]
    assert all(r["ttft_ms"] == "" and r["met_slo"] == "0" for r in failed)
    ok = [r for r in requests if not r["error"]]
    assert len(ok) == 9 and all(int(r["output_tokens"]) == 4 for r in ok)
    if status == "ok":
        ttfts = sorted(float(r["ttft_ms"]) for r in ok)  # the percentiles are over the requests that completed
        assert float(row["ttft_ms_p50"]) == pytest.approx(float(np.percentile(ttfts, 50)), rel=1e-6)
        assert float(row["slo_attainment"]) <= 9 / 12  # a failed request met no target
        assert float(row["achieved_request_rate"]) * float(row["duration_s"]) == pytest.approx(9, rel=1e-4)
    else:
        assert row["error"].startswith("3 of 12 requests failed (stream.max_failed_share: 0); request 3: "
                                       "RuntimeError: HTTP 500")
        assert row["ttft_ms_p50"] == ""  # an error point reports no latencies
    assert processes_with(marker) == []


@pytest.mark.engine
def test_a_server_that_dies_mid_point_ends_its_points_and_the_sweep_goes_on(tmp_path):
    """The server exits as timed request 5 arrives: that point fails on its refused requests, the next at once
    with the server's exit, and nothing is left running."""
    other = ", {name: openai, label: healthy, command: \"" + FAULT_SERVER + "\"}"
    config = fault_yaml(tmp_path / "f.yaml", "--die-after 7", 0.0, rates="[4, 8]", extra_backends=other)
    marker = uuid.uuid4().hex
    start = time.monotonic()
    proc = run_benchmark(config, "--output-dir", tmp_path / "out", "--no-plots", env={**os.environ, MARKER: marker})
    assert time.monotonic() - start < 120
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = {(r["backend"], r["request_rate"]): r for r in rows(tmp_path / "out" / "results.csv")}
    first, second = results[("faulty", "4")], results[("faulty", "8")]
    assert first["status"] == "error" and int(first["requests_failed"]) >= 7, first["error"]
    assert second["status"] == "error" and "the server exited with code 3 during the sweep" in second["error"]
    assert results[("healthy", "4")]["status"] == results[("healthy", "8")]["status"] == "ok"  # the sweep went on
    assert math.isfinite(float(results[("healthy", "8")]["goodput"]))
    failed = [r for r in rows(tmp_path / "out" / "requests.csv") if r["backend"] == "faulty" and r["error"]]
    assert len(failed) == int(first["requests_failed"])
    assert processes_with(marker) == []

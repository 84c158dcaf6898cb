"""plots on stream results: folders written by the real writer from seeded synthetic request timings (a
static-batching series that slows down as the rate grows and a continuous one that keeps up), checked
against figures computed here from the same timings, not read back through plots."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.measure.records import SLO, BatchSample, PointResult, RunContext
from harness.measure.sink import result_row
from harness.measure.writers import ResultsDir
from harness.plan.points import SweepPoint
from harness.scenarios.stream import RequestTiming, StreamTiming
from plots.report import make_report


def write_point(out: ResultsDir, result) -> None:
    out.write_point(result, result_row(result))

REPO = Path(__file__).resolve().parent.parent
HARDWARE = "AMD EPYC (2 cores)"
RATES = (1.0, 2.0, 4.0)
INPUT, OUTPUT = 128, 32
NUM_REQUESTS = 40
SLO_ = SLO(ttft_ms=500.0, tpot_ms=50.0, percentile=90.0)
SERIES = {"hf-static": "static", "vllm": "continuous"}
STREAM_STEMS = [f"stream_{kind}_in{INPUT}_out{OUTPUT}" for kind in
                ("latency_vs_rate", "throughput_vs_rate", "goodput_vs_rate", "ttft_cdf")] + [
    f"per_gpu_vs_per_user_stream_in{INPUT}_out{OUTPUT}"]


def context(backend):
    return RunContext("stream-test", backend, "tiny-llama", "fp32", HARDWARE, 1, 1)


def request_timings(backend, rate, seed, slip_s=0.0):
    """Poisson arrivals at `rate`, the same for every backend (as the harness seeds them); static batching's
    TTFT grows with the rate, continuous batching's stays low."""
    rng = np.random.default_rng(seed)
    start = 100.0
    arrivals = np.cumsum(np.random.default_rng(int(rate * 100)).exponential(1.0 / rate, NUM_REQUESTS))
    scale_s = 0.09 * rate ** 1.3 if backend == "hf-static" else 0.04 * (1 + 0.1 * rate)
    tpot_s = 0.02 if backend == "hf-static" else 0.012
    requests = []
    for i, offset in enumerate(arrivals):
        scheduled = start + offset
        dispatched = scheduled + 0.0003 + (slip_s if i >= NUM_REQUESTS - 3 else 0.0)
        ttft = scale_s * rng.lognormal(0.0, 0.2)
        first = scheduled + ttft
        last = first + tpot_s * rng.uniform(0.9, 1.1) * (OUTPUT - 1)
        requests.append(RequestTiming(i, scheduled, dispatched, dispatched, first, last, INPUT, OUTPUT,
                                      token_gaps_s=(tpot_s,) * (OUTPUT - 1)))
    return StreamTiming(start, max(r.last_token_s for r in requests), tuple(requests))


def stream_result(backend, rate, seed, slip_s=0.0, max_concurrency=None):
    point = SweepPoint(INPUT, OUTPUT, None, "random", rate, max_concurrency)
    timing = request_timings(backend, rate, seed, slip_s) if np.isfinite(rate) else request_timings(backend, 8, seed)
    return PointResult(context(backend), point, "ok", stream=timing, slo=SLO_, num_warmup_batches=2,
                       engine_stats={"batching": SERIES[backend]})


def write_stream_folder(path, slip_point=None, rates=RATES):
    """Both series at every rate; `slip_point` = (backend, rate) whose last requests left the client late."""
    results = ResultsDir(path)
    results.open(resume=False)
    timings = {}
    for seed, (backend, rate) in enumerate((b, r) for b in SERIES for r in rates):
        slip = 0.03 if slip_point == (backend, rate) else 0.0
        result = stream_result(backend, rate, seed, slip)
        write_point(results, result)
        timings[backend, rate] = result.stream
    return timings


def write_batch_folder(path):
    """A batch sweep as the current writer writes it: every column, the stream ones blank."""
    results = ResultsDir(path)
    results.open(resume=False)
    rng = np.random.default_rng(7)
    for batch_size in (1, 2, 4):
        latency = 200.0 + 30 * batch_size
        samples = [BatchSample(i, latency * rng.uniform(0.95, 1.05), 20.0 + batch_size, 6.0, (INPUT,) * batch_size,
                               (OUTPUT,) * batch_size) for i in range(3)]
        write_point(results, PointResult(context("hf"), SweepPoint(INPUT, OUTPUT, batch_size), "ok", samples=samples))


# -- what the report should say, from the timings themselves ---------------------------------------------

def figures(timing):
    ttft = np.array([(r.first_token_s - r.scheduled_s) * 1e3 for r in timing.requests])
    tpot = np.array([(r.last_token_s - r.first_token_s) * 1e3 / (r.output_tokens - 1) for r in timing.requests])
    e2e = np.array([(r.last_token_s - r.scheduled_s) * 1e3 for r in timing.requests])
    met = (ttft <= SLO_.ttft_ms) & (tpot <= SLO_.tpot_ms)
    duration_s = max(r.last_token_s for r in timing.requests) - timing.start_s
    return {"e2e_p50": np.percentile(e2e, 50), "attainment": met.mean(), "goodput": met.sum() / duration_s}


def expected_sustained(timings, backend):
    met = [rate for (b, rate), t in timings.items() if b == backend and figures(t)["attainment"] * 100 >= SLO_.percentile]
    return max(met) if met else None


@pytest.fixture(scope="module")
def stream_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    timings = write_stream_folder(root / "stream")
    report = make_report([root / "stream"], root / "out")
    return root, timings, report.read_text()


def table_rows(text):
    """`series -> cells` of the stream table (one group in these folders)."""
    section = text[text.index("## Request streams"):]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| series")]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows)}


# -- tests ----------------------------------------------------------------------------------------------

def test_synthetic_data_has_static_falling_behind():
    timings = {(b, r): request_timings(b, r, i) for i, (b, r) in enumerate((b, r) for b in SERIES for r in RATES)}
    assert expected_sustained(timings, "hf-static") == 2.0
    assert expected_sustained(timings, "vllm") == 4.0


def test_stream_only_folder_draws_every_stream_chart(stream_run):
    root, _, text = stream_run
    names = {p.name for p in (root / "out").iterdir()}
    assert names == {"report.md", "report.html", "plotly.min.js"} | {f"{stem}.png" for stem in STREAM_STEMS}
    assert all((root / "out" / f"{stem}.png").stat().st_size > 10_000 for stem in STREAM_STEMS)
    assert all(f"]({stem}.png)" in text for stem in STREAM_STEMS)
    assert "## Summary" not in text  # the batch table: no batch rows here
    assert "TTFT per request at 4 requests/s" in text  # the highest rate both ran ok


def test_stream_table_has_each_series_highest_sustained_rate(stream_run):
    _, timings, text = stream_run
    assert "### Input 128 / output 32 tokens, no concurrency cap" in text
    assert "SLO: TTFT <= 500 ms and TPOT <= 50 ms for at least 90% of requests" in text
    rows = table_rows(text)
    for backend, batching in SERIES.items():
        batching_cell, points_ok, rate = rows[backend][:3]
        assert (batching_cell, points_ok) == (batching, "3 of 3")
        assert float(rate) == expected_sustained(timings, backend)
        goodput = figures(timings[backend, float(rate)])["goodput"]
        assert float(rows[backend][-1]) == pytest.approx(goodput, rel=0.01)
    assert "Warning" not in text


def test_static_vs_continuous_paragraph_gives_the_measured_factors(stream_run):
    _, timings, text = stream_run
    static, continuous = figures(timings["hf-static", 4.0]), figures(timings["vllm", 4.0])
    paragraph = text[text.index("### Static vs continuous batching"):].split("\n\n")[1]
    assert "at 4 requests/s" in paragraph
    assert f"E2E p50 is {static['e2e_p50'] / continuous['e2e_p50']:.2f}x as much with static" in paragraph
    assert f"goodput is {continuous['goodput'] / static['goodput']:.2f}x as much with continuous" in paragraph
    assert static["e2e_p50"] / continuous["e2e_p50"] > 2


def test_no_shared_rate_is_said_so(tmp_path):
    results = ResultsDir(tmp_path / "run")
    results.open(resume=False)
    write_point(results, stream_result("hf-static", 1.0, 0))
    write_point(results, stream_result("vllm", 2.0, 1))
    text = make_report([tmp_path / "run"], tmp_path / "out").read_text()
    assert "ran ok at no common rate" in text
    assert "no offered rate at which every series (hf-static, vllm) ran ok" in text  # the TTFT CDF's note


def test_a_server_is_in_neither_camp_of_the_batching_comparison(tmp_path):
    results = ResultsDir(tmp_path / "run")
    results.open(resume=False)
    for seed, backend in enumerate(SERIES):
        result = stream_result(backend, 2.0, seed)
        if backend == "vllm":
            result = dataclasses.replace(result, engine_stats={"batching": "server"})
        write_point(results, result)
    text = make_report([tmp_path / "run"], tmp_path / "out").read_text()
    assert table_rows(text)["vllm"][0] == "server"
    assert "Static vs continuous" not in text


def test_a_late_client_is_warned_about(tmp_path):
    write_stream_folder(tmp_path / "run", slip_point=("vllm", 2.0))
    text = make_report([tmp_path / "run"], tmp_path / "out").read_text()
    warnings = [line for line in text.splitlines() if line.startswith("> **Warning:**")]
    assert len(warnings) == 1
    assert "vllm at rate 2/s" in warnings[0] and "limited the offered load" in warnings[0]


def test_missing_requests_csv_skips_the_cdf_with_a_note(tmp_path):
    write_stream_folder(tmp_path / "run")
    (tmp_path / "run" / "requests.csv").unlink()
    text = make_report([tmp_path / "run"], tmp_path / "out").read_text()
    assert not (tmp_path / "out" / f"stream_ttft_cdf_in{INPUT}_out{OUTPUT}.png").exists()
    assert "no requests.csv" in text
    assert (tmp_path / "out" / f"stream_goodput_vs_rate_in{INPUT}_out{OUTPUT}.png").exists()


def test_burst_points_stay_off_the_rate_axis_and_are_listed(tmp_path):
    results = ResultsDir(tmp_path / "run")
    results.open(resume=False)
    for backend in SERIES:
        for rate in (1.0, 2.0, float("inf")):
            write_point(results, stream_result(backend, rate, int(rate) if np.isfinite(rate) else 9))
    text = make_report([tmp_path / "run"], tmp_path / "out").read_text()
    assert "Burst (every request at once, not on the rate axis): hf-static: TTFT p50" in text
    assert "goodput" in text.split("Burst (every request at once, not on the rate axis)")[3]


@pytest.mark.engine
def test_batch_and_stream_folders_together_draw_both_kinds(tmp_path):
    write_batch_folder(tmp_path / "batch")
    write_stream_folder(tmp_path / "stream")
    text = make_report([tmp_path / "batch", tmp_path / "stream"], tmp_path / "out").read_text()
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {f"{stem}.png" for stem in STREAM_STEMS} <= names
    assert {f"latency_vs_throughput_in{INPUT}_out{OUTPUT}.png", "throughput_vs_batch_size.png",
            "tpot_vs_batch_size.png", "ttft_vs_input_length_hf.png"} <= names
    assert "| hf | 128 | 32 | 3 of 3 |" in text  # the batch summary: batch rows only
    assert set(table_rows(text)) == {"hf-static", "vllm"}  # the stream tables: stream rows only
    assert "bs <NA>" not in text and "nan" not in text


@pytest.mark.engine
def test_cli_on_a_stream_folder_exits_0(tmp_path):
    write_stream_folder(tmp_path / "run")
    result = subprocess.run([sys.executable, "-m", "plots", str(tmp_path / "run")], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "plots" / "report.md").exists()

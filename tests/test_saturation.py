"""Time-bounded streams (`stream.duration_s`) and saturation in a rate sweep (`stream.saturation_margin`,
`stream.stop_at_saturation`): the rules on hand-made timings, then the runner on the synthetic engine, in process."""

import pytest

from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.measure.records import RunContext
from harness.measure.sink import result_row
from harness.plan.sweep import plan_sweep
from harness.run.runner import EntryRunner, RunEvents
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.rate_search import RateSearch
from harness.scenarios.saturation import SaturationStop, judge
from harness.scenarios.stream import RequestTiming, ServerSeries, StreamSpec, StreamTiming, Turns
from harness.scenarios.time_bound import due_within
from workloads.registry import WORKLOADS, build_workload

# --- the rules, on hand-made timings ------------------------------------------------------------------------------


def timing(n: int, gap_s: float, service_s: float, server=None) -> StreamTiming:
    """n requests due every gap_s at one server that takes service_s each, first come first served."""
    requests, free = [], 0.0
    for i in range(n):
        due = i * gap_s
        start = max(due, free)
        free = start + service_s
        requests.append(RequestTiming(i, due, due, start, start + service_s / 2, free, 16, 4))
    return StreamTiming(0.0, free, tuple(requests), server=server)


def test_an_engine_that_keeps_up_is_not_saturated():
    assert judge(timing(40, 0.1, 0.05), 0.1).saturated is False


def test_an_engine_at_half_the_offered_rate_is_saturated_and_says_why():
    found = judge(timing(40, 0.1, 0.2), 0.1)
    assert found.saturated
    assert found.reason.startswith("completed 5/s, 50% under the 10/s offered (stream.saturation_margin 0.1); "
                                   "requests in flight rose from ")
    assert found.reason.endswith("(the client's count)")


def test_a_shortfall_within_the_margin_is_not_saturation():
    """At 5% short the queue grows, but by less than the margin asks."""
    assert judge(timing(40, 0.1, 0.105), 0.1).saturated is False
    assert judge(timing(40, 0.1, 0.105), 0.01).saturated is True


def test_a_long_latency_alone_is_not_a_shortfall():
    """Every request takes 10 gaps, the queue never grows: completions come at the offered rate."""
    requests = tuple(RequestTiming(i, i * 0.1, i * 0.1, i * 0.1, i * 0.1 + 0.5, i * 0.1 + 1.0, 16, 4)
                     for i in range(30))
    assert judge(StreamTiming(0.0, 4.0, requests), 0.1).saturated is False


def test_a_burst_and_a_short_stream_are_not_judged():
    assert judge(timing(40, 0.0, 0.05), 0.1) is None
    assert judge(timing(5, 0.1, 0.5), 0.1) is None


def test_the_servers_queue_is_read_where_it_was_scraped():
    """Completions fall short; the server says its queue stayed flat (the client's count would have risen)."""
    times = tuple(i * 0.25 for i in range(20))
    flat = ServerSeries(times, {"requests_running": (4.0,) * 20, "requests_waiting": (0.0,) * 20})
    assert judge(timing(40, 0.1, 0.2, flat), 0.1).saturated is False
    rising = ServerSeries(times, {"requests_running": (4.0,) * 20, "requests_waiting": tuple(map(float, range(20)))})
    assert judge(timing(40, 0.1, 0.2, rising), 0.1).reason.endswith("(the server's running + waiting)")


def test_the_stop_skips_only_higher_rates_at_the_same_key():
    stop = SaturationStop(True)
    stop.note("a", 8.0, judge(timing(40, 0.1, 0.2), 0.1))
    assert stop.skip_reason("a", 8.0) is None and stop.skip_reason("b", 16.0) is None
    assert stop.skip_reason("a", 16.0).startswith("not run: 8/s saturated the engine")
    assert SaturationStop(False).skip_reason("a", 16.0) is None


def test_due_within_keeps_the_requests_due_before_the_bound():
    requests = BatchSpec([[i] for i in range(10)], (4,) * 10, seeds=tuple(range(10)))
    stream = StreamSpec(requests, arrival_times("constant", 10.0, 10, 0), 2)
    cut = due_within(stream, 0.45)
    assert cut.num_requests == 5 and cut.arrivals_s == stream.arrivals_s[:5] and cut.max_concurrency == 2
    assert list(cut.requests.prompts) == [[i] for i in range(5)] and cut.requests.seeds == tuple(range(5))
    assert due_within(stream, None) is stream and due_within(stream, 5.0) is stream
    assert due_within(stream, 1e-6).num_requests == 1  # the first is due at 0


def test_due_within_keeps_whole_conversations():
    requests = BatchSpec([[i] for i in range(5)], (4,) * 5)
    turns = Turns((0, 0, 1, 1, 2), (1, 2, 1, 2, 1), (None, 0, None, 2, None), (0.0, 0.1, 0.0, 0.1, 0.0))
    cut = due_within(StreamSpec(requests, (0.0, 0.0, 1.0, 1.0, 2.0), None, turns), 1.5)
    assert cut.num_requests == 4 and cut.turns.follows == (None, 0, None, 2)


# --- the runner on the synthetic engine ---------------------------------------------------------------------------


def run_sweep(tmp_path, model, stream: str, tpot_ms: float = 4.0):
    """A stream sweep of the synthetic engine (16 in, 6 out), run in this process; its rows by rate."""
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, dtype: fp32}\nscenario: stream\n"
                    f"backends: [{{name: synthetic, ttft_ms: 1, tpot_ms: {tpot_ms}}}]\ninput_lengths: [16]\n"
                    f"output_lengths: [6]\nstream: {{num_warmup_requests: 0, {stream}}}\n")
    config = load_config(path, [], BACKENDS, WORKLOADS)
    [plan] = plan_sweep(config, model, BACKENDS, build_workload(config, model))
    results = []
    context = RunContext("t", "synthetic", "tiny-llama", "fp32", "cpu", 1, 1)
    EntryRunner(plan, model, config, context, RunEvents(results.append)).run(set())
    return {r.point.request_rate: (r, result_row(r)) for r in results}


def test_a_rate_sweep_stops_at_the_first_saturated_rate(tmp_path, model):
    """One request at a time (max_concurrency 1), each about 21 ms: about 45 requests/s at most."""
    rows = run_sweep(tmp_path, model, "arrival: constant, request_rates: [10, 100, 200], max_concurrency: 1, "
                                      "num_requests: 20")
    assert [(rate, row["status"], row["saturated"]) for rate, (_, row) in rows.items()] == [
        (10.0, "ok", "false"), (100.0, "ok", "true"), (200.0, "skipped", None)]
    assert rows[100.0][1]["saturation_reason"].startswith("completed ")
    assert rows[200.0][1]["error"].startswith("not run: 100/s saturated the engine at these lengths and cap "
                                              "(stream.stop_at_saturation): completed ")


def test_without_the_stop_every_rate_runs(tmp_path, model):
    rows = run_sweep(tmp_path, model, "arrival: constant, request_rates: [10, 100, 200], max_concurrency: 1, "
                                      "num_requests: 20, stop_at_saturation: false")
    assert [(row["status"], row["saturated"]) for _, row in rows.values()] == [
        ("ok", "false"), ("ok", "true"), ("ok", "true")]


def test_a_time_bounded_point_ends_within_a_request_of_its_bound(tmp_path, model):
    """20 requests/s for 0.5 s: 10 of the 100 scheduled are due in time (0, 0.05, ..., 0.45 s)."""
    rows = run_sweep(tmp_path, model, "arrival: constant, request_rates: [20], num_requests: 100, duration_s: 0.5")
    result, row = rows[20.0]
    assert row["status"] == "ok" and row["num_requests"] == 10 == len(result.stream.requests)
    last_due = max(r.scheduled_s for r in result.stream.requests) - result.stream.start_s
    assert last_due < 0.5
    longest = max(r.last_token_s - r.scheduled_s for r in result.stream.requests)
    assert row["duration_s"] <= 0.5 + longest
    assert row["achieved_request_rate"] == pytest.approx(10 / row["duration_s"])


def test_a_rate_search_counts_a_saturated_probe_as_missed():
    search = RateSearch(1.0, 0.1, 16)
    while (rate := search.next_rate()) is not None:  # every probe meets the SLO; 8/s and above saturate
        search.record(rate, True, saturated=rate >= 8)
    assert search.sustained < 8 <= search.failed and search.converged
    assert search.describe().startswith("probes: 1/s met, 2/s met, 4/s met, 8/s saturated, 6/s met, 7/s met")


def test_a_rate_search_on_a_saturating_engine_stops_raising_the_rate(tmp_path, model):
    """Each request about 31 ms, one at a time: about 30/s at most; an SLO every probe meets."""
    rows = run_sweep(tmp_path, model, "arrival: constant, request_rates: auto, max_concurrency: 1, "
                                      "num_requests: 20, search: {start_rate: 10, max_probes: 3}, "
                                      "slo: {ttft_ms: 100000, tpot_ms: 100000}", tpot_ms=6.0)
    row = rows[None][1]
    assert row["search"] == "result" and row["search_probes"].startswith("probes: 10/s met, 20/s met, 40/s saturated")
    assert rows[40.0][1]["saturated"] == "true" and rows[40.0][1]["slo_attainment"] == 1.0
    assert row["max_rate_within_slo"] == 20.0


# --- against a server of fixed capacity -----------------------------------------------------------------------------

@pytest.mark.engine
def test_a_rate_sweep_against_a_server_that_cannot_keep_up_is_cut_at_its_first_saturated_rate(tmp_path):
    """scripts/loopback_server.py answering one request at a time, 6 tokens 10 ms apart: about 16 requests/s. The
    client sends at every rate with no cap of its own, so the queue is the server's: 5/s keeps up, 60/s does not,
    and 120/s is not run, the reason in its row."""
    import csv

    from tests.conftest import REPO, run_benchmark

    command = (f"{{python}} {REPO / 'scripts' / 'loopback_server.py'} --port {{port}} --token-gap-ms 10 "
               "--max-running 1")
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, weights: random, dtype: fp32}\n"
                    f"scenario: stream\nbackends: [{{name: openai, command: '{command}'}}]\n"
                    "input_lengths: [16]\noutput_lengths: [6]\n"
                    "stream: {arrival: constant, request_rates: [5, 60, 120], num_requests: 24, "
                    "num_warmup_requests: 1}\n")
    proc = run_benchmark(path, "--output-dir", tmp_path / "out", "--no-plots", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        found = {row["request_rate"]: row for row in csv.DictReader(f)}
    assert [(r, found[r]["status"], found[r]["saturated"]) for r in ("5", "60", "120")] == [
        ("5", "ok", "false"), ("60", "ok", "true"), ("120", "skipped", "")]
    assert found["120"]["error"].startswith("not run: 60/s saturated the engine at these lengths and cap")

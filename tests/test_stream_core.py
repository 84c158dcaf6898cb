"""Request streams without an engine: arrival times, the arrival loop, and the per-point figures."""

import asyncio
import dataclasses
import math
import time

import numpy as np
import pytest

from app.console import print_summary
from harness.measure.metrics import max_in_flight, request_figures, slo_attainment, slo_met, summarize_stream
from harness.measure.records import SLO
from harness.run.output_checks import StreamFailed, judge_stream
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import RequestTiming, StreamSpec, StreamTiming, Submitted, run_stream

SLO_2S = SLO(ttft_ms=2000, tpot_ms=200, percentile=99)


def test_poisson_arrivals_have_the_rate_and_variance_of_a_poisson_process():
    rate, n = 4.0, 20_001
    gaps = np.diff(arrival_times("poisson", rate, n, seed=0))
    # Exponential gaps: mean 1/rate, variance 1/rate^2; 20k draws put both within a few percent.
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.03)
    assert gaps.var() == pytest.approx(1 / rate**2, rel=0.06)
    counts = np.histogram(arrival_times("poisson", rate, n, seed=1), bins=np.arange(0, 4000, 1.0))[0]
    assert counts.mean() == pytest.approx(rate, rel=0.03) and counts.var() == pytest.approx(rate, rel=0.1)


def test_arrivals_are_seeded_and_scale_with_the_rate():
    a = arrival_times("poisson", 2.0, 50, seed=7)
    assert a == arrival_times("poisson", 2.0, 50, seed=7)  # what every backend is offered
    assert a != arrival_times("poisson", 2.0, 50, seed=8)
    assert a != arrival_times("poisson", 2.0, 50, seed=7, phase="warmup")
    # common random numbers: the stream at 8/s is the one at 2/s, four times faster
    assert np.allclose(np.array(a) / 4, arrival_times("poisson", 8.0, 50, seed=7))
    assert a[0] == 0.0 and all(x <= y for x, y in zip(a, a[1:]))
    assert arrival_times("constant", 4.0, 5, 0) == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert arrival_times("burst", 4.0, 3, 0) == arrival_times("poisson", math.inf, 3, 0) == (0.0, 0.0, 0.0)


def _stream(n, arrivals, cap=None):
    return StreamSpec(BatchSpec([[1, 2, 3]] * n, (4,) * n), tuple(arrivals), cap)


def test_drive_releases_each_request_at_its_time_and_caps_concurrency():
    async def engine(index):  # 30 ms per request, four tokens
        first = time.perf_counter()
        await asyncio.sleep(0.03)
        return Submitted(first, time.perf_counter(), 4)

    timing = run_stream(_stream(6, [0.0] * 6, cap=2), engine)
    assert [r.index for r in timing.requests] == list(range(6))
    assert max_in_flight(timing.requests) == 2
    for r in timing.requests:
        assert r.scheduled_s <= r.dispatched_s <= r.sent_s <= r.first_token_s <= r.last_token_s
    # capped at 2, six 30 ms requests take three rounds; the last waited two rounds at the client, clock running
    last = request_figures(timing.requests[-1])
    assert last.client_wait_ms >= 55 and last.e2e_ms >= 85


def test_a_saturated_client_shows_up_as_send_slip_and_a_warning(capsys):
    def blocking_engine(index):  # holds the event loop 20 ms per request: the client cannot keep up
        time.sleep(0.02)
        now = time.perf_counter()

        async def done():
            return Submitted(now, now, 1)
        return done()

    timing = run_stream(_stream(10, arrival_times("constant", 200.0, 10, 0)), blocking_engine)
    row = summarize_stream(timing, SLO_2S)
    assert row["send_slip_ms_p99"] > 50  # ten requests due in 45 ms, released over 200 ms
    fmt = {k: "" if v is None else str(v) for k, v in row.items()}
    print_summary([{**fmt, "backend": "null", "scenario": "stream", "status": "ok", "request_rate": "200",
                    "max_concurrency": "", "input_length": "3", "output_length": "1"}])
    out = capsys.readouterr().out
    assert "p99 send slip" in out and "the client, not the engine, limited the offered load" in out


def _request(i, scheduled, first, last, tokens, sent=None):
    sent = scheduled if sent is None else sent
    return RequestTiming(i, scheduled, scheduled, sent, first, last, 10, tokens)


def test_slo_attainment_and_goodput_on_synthetic_requests():
    # four requests over 10 s: one late first token, one slow decode, two within both targets
    requests = (
        _request(0, 0.0, 0.5, 1.5, 11),    # ttft 500 ms, tpot 100 ms: met
        _request(1, 1.0, 3.5, 4.0, 11),    # ttft 2500 ms: missed
        _request(2, 2.0, 2.1, 7.1, 11),    # tpot 500 ms: missed
        _request(3, 3.0, 3.2, 10.0, 1),    # one token: no tpot, ttft 200 ms: met
    )
    row = summarize_stream(StreamTiming(0.0, 10.0, requests), SLO_2S)
    assert row["slo_attainment"] == 0.5
    assert slo_attainment(StreamTiming(0.0, 10.0, requests), SLO_2S) == 0.5  # what a rate search decides on
    assert row["goodput"] == pytest.approx(2 / 10.0)
    assert row["achieved_request_rate"] == pytest.approx(4 / 10.0)
    assert row["throughput_tokens_per_s"] == pytest.approx(34 / 10.0)
    assert row["ttft_ms_p50"] == pytest.approx(350.0)
    assert row["e2e_ms_mean"] == pytest.approx((1500 + 3000 + 5100 + 7000) / 4)
    assert row["max_concurrency_reached"] == 3  # at t=3: requests 1 (to 4.0), 2 (to 7.1) and 3
    assert not slo_met(row["slo_attainment"], SLO_2S) and slo_met(0.99, SLO_2S)


def test_in_flight_counts_touching_requests_once():
    a = _request(0, 0.0, 0.5, 1.0, 2)
    b = _request(1, 1.0, 1.5, 2.0, 2)  # starts exactly when a ends
    c = _request(2, 0.5, 0.7, 3.0, 2)
    assert max_in_flight([a, b]) == 1
    assert max_in_flight([a, b, c]) == 2


def test_failed_requests_are_counted_and_left_out_of_every_figure_but_slo_attainment():
    requests = (
        _request(0, 0.0, 0.5, 1.5, 11),    # met
        dataclasses.replace(_request(1, 1.0, None, None, 0), error="RuntimeError: HTTP 500 from x"),
        _request(2, 2.0, 2.1, 3.1, 11),    # met
        _request(3, 3.0, 3.2, 9.0, 11),    # tpot 580 ms: missed
    )
    row = summarize_stream(StreamTiming(0.0, 10.0, requests), SLO_2S)
    assert (row["num_requests"], row["requests_failed"]) == (4, 1)
    assert row["slo_attainment"] == 0.5  # 2 of 4: the failed one met nothing
    assert slo_attainment(StreamTiming(0.0, 10.0, requests), SLO_2S) == 0.5  # the rate search counts it the same
    assert row["duration_s"] == 9.0 and row["achieved_request_rate"] == pytest.approx(3 / 9.0)
    assert row["throughput_tokens_per_s"] == pytest.approx(33 / 9.0)
    assert row["ttft_ms_p50"] == pytest.approx(200.0)  # of 500, 100, 200 ms


def test_judge_stream_marks_wrong_counts_and_holds_the_failed_share():
    spec = StreamSpec(BatchSpec([[1, 2, 3]] * 4, (4,) * 4), (0.0,) * 4)
    requests = (_request(0, 0.0, 0.1, 0.2, 4), _request(1, 0.0, 0.1, 0.2, 3),
                dataclasses.replace(_request(2, 0.0, None, None, 0), error="RuntimeError: boom"),
                _request(3, 0.0, 0.1, 0.2, 4))
    timing = StreamTiming(0.0, 1.0, requests)
    judged = judge_stream(timing, spec, max_failed_share=0.5)
    assert [r.error for r in judged.requests] == ["", "ShortOutputError: 3 tokens, 4 were forced",
                                                  "RuntimeError: boom", ""]
    with pytest.raises(StreamFailed) as failed:
        judge_stream(timing, spec, max_failed_share=0.25)
    assert str(failed.value) == ("2 of 4 requests failed (stream.max_failed_share: 0.25); request 1: "
                                 "ShortOutputError: 3 tokens, 4 were forced")
    assert [r.ok for r in failed.value.timing.requests] == [True, False, False, True]  # kept for requests.csv

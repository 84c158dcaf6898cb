"""Metric math on synthetic samples: the formulas of DESIGN.md section 2."""

import math

import pytest

from harness.metrics import describe, summarize
from harness.records import BatchSample
from harness.sweep import SweepPoint
from harness.timing import BatchTiming


def sample(i, latency, ttft, tpot, tokens=8, requests=None):
    return BatchSample(i, latency, ttft, tpot, tokens, requests)


def test_batch_timing_definitions():
    t = BatchTiming(start_s=10.0, first_token_s=10.05, last_token_s=10.4, end_s=10.41, output_tokens=(8, 8))
    assert t.latency_ms == pytest.approx(410.0)
    assert t.ttft_ms == pytest.approx(50.0)
    assert t.tpot_ms(8) == pytest.approx(350.0 / 7)
    assert t.tpot_ms(1) is None


def test_describe_percentiles_and_sample_std():
    stats = describe([1.0, 2.0, 3.0, 4.0, 10.0], "x")
    assert stats["x_mean"] == pytest.approx(4.0)
    assert stats["x_p50"] == pytest.approx(3.0)
    assert stats["x_p90"] == pytest.approx(7.6)  # linear interpolation between 4 and 10
    assert stats["x_p99"] == pytest.approx(9.76)
    assert stats["x_std"] == pytest.approx(math.sqrt(((3**2 + 2**2 + 1 + 0 + 6**2)) / 4))


def test_describe_single_and_empty():
    assert describe([5.0], "x")["x_std"] == 0.0
    assert all(v is None for v in describe([], "x").values())


def test_summarize_rates_from_mean_latency():
    point = SweepPoint(input_length=128, output_length=8, batch_size=4)
    samples = [sample(0, 100.0, 20.0, 10.0), sample(1, 300.0, 40.0, 30.0)]
    m = summarize(samples, point)
    assert m["latency_ms_mean"] == pytest.approx(200.0)
    # total tokens over total time, not the mean of per-batch rates (which would be 213.3)
    assert m["throughput_tokens_per_s"] == pytest.approx(4 * 8 / 0.2)
    assert m["prefill_tokens_per_s"] == pytest.approx(4 * 128 / 0.03)
    assert m["latency_per_output_token_ms"] == pytest.approx(25.0)
    assert m["tpot_ms_mean"] == pytest.approx(20.0)


def test_summarize_output_length_one_has_no_tpot():
    point = SweepPoint(input_length=16, output_length=1, batch_size=2)
    m = summarize([sample(0, 10.0, 9.5, None, tokens=1)], point)
    assert m["tpot_ms_mean"] is None and m["tpot_ms_p99"] is None
    assert m["throughput_tokens_per_s"] == pytest.approx(200.0)


def test_request_ttfts_pooled_over_batches():
    point = SweepPoint(16, 4, 2)
    m = summarize([sample(0, 10, 5, 1, requests=(1.0, 3.0)), sample(1, 10, 5, 1, requests=(5.0, 7.0))], point)
    assert m["request_ttft_ms_mean"] == pytest.approx(4.0)
    assert m["request_ttft_ms_p50"] == pytest.approx(4.0)
    assert "request_ttft_ms_std" not in m

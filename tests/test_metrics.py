"""Metric math on synthetic samples: the formulas of docs/measurement.md."""

import math

import pytest

from harness.measure.metrics import describe, summarize
from harness.measure.records import BatchSample
from harness.scenarios.batch import BatchTiming


def sample(i, latency, ttft, tpot, batch_size=4, input_length=128, output_length=8, requests=None, latencies=None):
    return BatchSample(i, latency, ttft, tpot, (input_length,) * batch_size, (output_length,) * batch_size,
                       requests, latencies)


def test_batch_timing_definitions():
    t = BatchTiming(start_s=10.0, first_token_s=10.05, last_token_s=10.4, end_s=10.41, output_tokens=(8, 8))
    assert t.latency_ms == pytest.approx(410.0)
    assert t.ttft_ms == pytest.approx(50.0)
    assert t.tpot_ms == pytest.approx(350.0 / 7)
    one = BatchTiming(start_s=10.0, first_token_s=10.05, last_token_s=10.05, end_s=10.06, output_tokens=(1, 1))
    assert one.tpot_ms is None


def test_tpot_counts_the_steps_of_the_longest_sequence():
    t = BatchTiming(10.0, 10.05, 10.4, 10.41, output_tokens=(3, 8), request_first_token_s=(10.05, 10.05),
                    request_last_token_s=(10.15, 10.4))
    assert t.tpot_ms == pytest.approx(350.0 / 7)
    assert t.request_ttfts_ms() == pytest.approx((50.0, 50.0))
    assert t.request_latencies_ms() == pytest.approx((150.0, 400.0))


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
    samples = [sample(0, 100.0, 20.0, 10.0), sample(1, 300.0, 40.0, 30.0)]
    m = summarize(samples)
    assert m["latency_ms_mean"] == pytest.approx(200.0)
    # total tokens over total time, not the mean of per-batch rates (which would be 213.3)
    assert m["throughput_tokens_per_s"] == pytest.approx(4 * 8 / 0.2)
    assert m["prefill_tokens_per_s"] == pytest.approx(4 * 128 / 0.03)
    assert m["latency_per_output_token_ms"] == pytest.approx(25.0)
    assert m["tpot_ms_mean"] == pytest.approx(20.0)


def test_summarize_output_length_one_has_no_tpot():
    m = summarize([sample(0, 10.0, 9.5, None, batch_size=2, input_length=16, output_length=1)])
    assert m["tpot_ms_mean"] is None and m["tpot_ms_p99"] is None
    assert m["throughput_tokens_per_s"] == pytest.approx(200.0)


def test_request_ttfts_pooled_over_batches():
    two = dict(batch_size=2, input_length=16, output_length=4)
    m = summarize([sample(0, 10, 5, 1, requests=(1.0, 3.0), **two), sample(1, 10, 5, 1, requests=(5.0, 7.0), **two)])
    assert m["request_ttft_ms_mean"] == pytest.approx(4.0)
    assert m["request_ttft_ms_p50"] == pytest.approx(4.0)
    assert "request_ttft_ms_std" not in m


def test_mixed_lengths_count_real_tokens_and_per_request_tpot():
    """Two prompts of 10 and 30 tokens; one stops at EOS after 2 tokens, the other runs 5."""
    s = BatchSample(0, latency_ms=100.0, ttft_ms=20.0, tpot_ms=20.0, input_tokens=(10, 30), output_tokens=(2, 5),
                    request_ttfts_ms=(20.0, 20.0), request_latencies_ms=(40.0, 100.0))
    m = summarize([s])
    assert (m["input_tokens_mean"], m["input_tokens_max"], m["output_tokens_mean"]) == (20.0, 30, 3.5)
    assert m["throughput_tokens_per_s"] == pytest.approx(7 / 0.1)  # produced tokens, never padding
    assert m["prefill_tokens_per_s"] == pytest.approx(40 / 0.02)
    assert m["latency_per_output_token_ms"] == pytest.approx(100.0 / 5)  # the batch ran 5 steps
    # per request: (its last - its first) / (its tokens - 1), as vLLM's serving benchmark
    assert m["request_tpot_ms_mean"] == pytest.approx((20.0 / 1 + 80.0 / 4) / 2)
    assert m["request_latency_ms_p50"] == pytest.approx(70.0)


def test_a_one_token_request_has_no_tpot():
    s = BatchSample(0, 50.0, 20.0, 30.0, (8, 8), (1, 2), (20.0, 20.0), (20.0, 50.0))
    assert summarize([s])["request_tpot_ms_mean"] == pytest.approx(30.0)


def test_prefix_cache_hit_rate_of_batches_is_cached_over_prompt_tokens():
    cached = [BatchSample(i, 100.0, 20.0, 10.0, (40, 40), (4, 4), cached_tokens=(32, 16)) for i in range(2)]
    assert summarize(cached)["prefix_cache_hit_rate"] == pytest.approx(96 / 160)
    unknown = cached[:1] + [BatchSample(1, 100.0, 20.0, 10.0, (40, 40), (4, 4))]  # an engine that does not say
    assert "prefix_cache_hit_rate" not in summarize(unknown)

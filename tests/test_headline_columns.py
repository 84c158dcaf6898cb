"""The headline view's columns (docs/measurement.md, "Per GPU and per user"): output tokens/s per GPU and per user,
and energy per million output tokens, each from what the point measured and nothing else."""

import pytest

from harness.measure.metrics import point_figures
from harness.measure.records import SLO, BatchSample, PointResult, RunContext
from harness.plan.points import SweepPoint
from harness.scenarios.stream import RequestTiming, StreamTiming


def context(num_devices: int) -> RunContext:
    return RunContext("headline", "vllm", "tiny-llama", "bf16", "H100", num_devices, num_devices)


def batch_point(num_devices: int, energy_j=None) -> PointResult:
    # Two batches of 4 sequences, 8 tokens each: 400 and 600 ms, TPOT 40 and 60 ms.
    samples = tuple(BatchSample(i, latency, 50.0, tpot, (16,) * 4, (8,) * 4, energy_j=energy_j)
                    for i, (latency, tpot) in enumerate(((400.0, 40.0), (600.0, 60.0))))
    return PointResult(context(num_devices), SweepPoint(16, 8, 4), "ok", samples=samples)


def request(index: int, first_s: float, last_s: float, output_tokens: int) -> RequestTiming:
    return RequestTiming(index, 0.0, 0.0, 0.0, first_s, last_s, 16, output_tokens)


def stream_point(requests) -> PointResult:
    timing = StreamTiming(0.0, max(r.last_token_s for r in requests), tuple(requests))
    return PointResult(context(2), SweepPoint(16, 8, None, "random", 2.0), "ok", stream=timing,
                       slo=SLO(500.0, 50.0, 90.0))


@pytest.mark.parametrize("num_devices", [1, 8])
def test_a_batch_points_speeds_per_gpu_and_per_user(num_devices):
    figures = point_figures(batch_point(num_devices))
    assert figures["throughput_tokens_per_s"] == pytest.approx(64 / 1.0)  # 2 x 4 x 8 tokens over 1 s
    assert figures["output_tokens_per_s_per_gpu"] == pytest.approx(64 / num_devices)
    assert figures["output_tokens_per_s_per_user"] == pytest.approx(1000 / 50.0)  # 1000 / tpot_ms_mean


def test_a_streams_speed_per_user_is_the_median_requests_own():
    # Per request, (tokens - 1) / (last - first): 7 / 0.7 = 10, 7 / 0.35 = 20, 3 / 0.1 = 30 tokens/s; a one-token
    # request and one whose tokens all came at once have no such speed.
    requests = [request(0, 1.0, 1.7, 8), request(1, 1.0, 1.35, 8), request(2, 2.0, 2.1, 4), request(3, 1.0, 1.0, 1),
                request(4, 1.0, 1.0, 5)]
    figures = point_figures(stream_point(requests))
    assert figures["output_tokens_per_s_per_user"] == pytest.approx(20.0)
    assert figures["output_tokens_per_s_per_gpu"] == pytest.approx(figures["throughput_tokens_per_s"] / 2)


def test_energy_per_million_tokens_is_the_measured_energy_and_only_that():
    measured = point_figures(batch_point(1, energy_j=32.0))  # 64 J over 64 tokens: 1 J a token
    assert measured["energy_kwh_per_million_output_tokens"] == pytest.approx(1e6 / 3.6e6)
    assert point_figures(batch_point(1))["energy_kwh_per_million_output_tokens"] is None  # no counter: blank


def test_a_point_that_did_not_run_has_no_speeds():
    skipped = PointResult(context(1), SweepPoint(16, 8, 4), "skipped", error="estimated above memory")
    figures = point_figures(skipped)
    assert figures["output_tokens_per_s_per_gpu"] is None and "output_tokens_per_s_per_user" not in figures

"""The arrival processes beyond poisson (gamma, ramp, stages): their statistics, their deterministic schedule, the
seed rule, and the stream keys' checks (no engine)."""

import math

import numpy as np
import pytest

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.scenarios.arrival_shapes import POISSON, RateSchedule, Shape
from harness.scenarios.arrivals import arrival_times, stream_arrivals
from workloads.registry import WORKLOADS

N = 2000
STREAM = ["yamls/cpu-stream.yaml"]


def gaps(arrival: str, rate: float, seed: int = 0, shape: Shape = POISSON, phase: str = "timed") -> np.ndarray:
    return np.diff(arrival_times(arrival, rate, N, seed, phase, shape))


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_the_coefficient_of_variation(burstiness):
    g = gaps("gamma", 5.0, shape=Shape(burstiness))
    assert g.std() / g.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)
    assert 1 / g.mean() == pytest.approx(5.0, rel=0.05)


def test_gamma_burstiest_over_many_seeds():
    """At shape 0.25 one stream of 2,000 gaps estimates the CV to about 6% (gamma's kurtosis is high); ten pooled
    hold it to 2%."""
    pooled = np.concatenate([gaps("gamma", 5.0, seed, Shape(0.25)) for seed in range(10)])
    assert pooled.std() / pooled.mean() == pytest.approx(2.0, rel=0.03)


def test_gamma_of_shape_1_is_the_poisson_stream():
    assert arrival_times("gamma", 3.0, 50, 7, shape=Shape(1.0)) == arrival_times("poisson", 3.0, 50, 7)


@pytest.mark.parametrize("arrival,shape", [("gamma", Shape(0.5)), ("ramp", Shape(ramp=(1.0, 30.0))),
                                           ("stages", Shape(stages=((4.0, 20.0), (8.0, 10.0))))])
def test_same_seed_same_times_another_seed_or_phase_other_times(arrival, shape):
    count = None if arrival == "stages" else 300
    times = arrival_times(arrival, 6.0, count, 3, "timed", shape)
    assert times == arrival_times(arrival, 6.0, count, 3, "timed", shape)
    assert times[0] == 0.0 and all(b >= a for a, b in zip(times, times[1:]))
    assert times != arrival_times(arrival, 6.0, count, 4, "timed", shape)
    assert times != arrival_times(arrival, 6.0, count, 3, "warmup", shape)


def test_gamma_times_at_twice_the_rate_are_halved():
    slow = np.array(arrival_times("gamma", 2.0, N, 1, shape=Shape(0.3)))
    fast = np.array(arrival_times("gamma", 4.0, N, 1, shape=Shape(0.3)))
    np.testing.assert_allclose(fast, slow / 2, rtol=1e-12, atol=1e-12)


def test_ramp_intensity_exactly():
    ramp = RateSchedule.ramp(2.0, 10.0, 6.0)
    assert ramp.end_s == 10.0
    assert [ramp.rate_at(t) for t in (0.0, 5.0, 10.0, 25.0)] == [2.0, 4.0, 6.0, 6.0]
    # Lambda(t) = 2t + 0.2t^2 up to 10 s (40 requests), then 6 a second.
    for t in (0.0, 1.0, 4.5, 10.0, 12.5):
        expected = 2 * t + 0.2 * t * t if t <= 10 else 40.0 + 6 * (t - 10)
        assert ramp.cumulative(t) == pytest.approx(expected, abs=1e-9)
        assert ramp.inverse(expected) == pytest.approx(t, abs=1e-9)
    assert ramp.inverse(40.0) == pytest.approx(10.0, abs=1e-3)  # the ramp ends when 40 requests are expected
    down = RateSchedule.ramp(6.0, 10.0, 2.0)  # a ramp may fall too
    assert down.cumulative(10.0) == pytest.approx(40.0) and down.inverse(down.cumulative(7.0)) == pytest.approx(7.0)


def test_ramp_maps_the_unit_poisson_draws_through_the_intensity():
    """Common random numbers: a ramp's times are the rate-1 poisson stream's, rescaled by Lambda^-1."""
    ramp = RateSchedule.ramp(2.0, 50.0, 20.0)
    unit = arrival_times("poisson", 1.0, 400, 5)
    times = arrival_times("ramp", 20.0, 400, 5, shape=Shape(ramp=(2.0, 50.0)))
    np.testing.assert_allclose(times, [ramp.inverse(s) for s in unit], atol=1e-9)


def test_ramp_counts_per_window_follow_the_integrated_rate():
    ramp = RateSchedule.ramp(2.0, 100.0, 20.0)  # 1,100 expected during the ramp, then 20/s
    times = np.array(arrival_times("ramp", 20.0, N, 0, shape=Shape(ramp=(2.0, 100.0))))
    for start in range(0, 140, 10):
        expected = ramp.cumulative(start + 10) - ramp.cumulative(start)
        got = np.count_nonzero((times >= start) & (times < start + 10))
        assert abs(got - expected) <= 4 * math.sqrt(expected) + 1, (start, got, expected)


STAGES = ((5.0, 40.0), (20.0, 40.0), (2.0, 50.0))


def test_stages_counts_follow_each_stage_and_stop_at_its_end():
    times = np.array(arrival_times("stages", 1.0, None, 0, shape=Shape(stages=STAGES)))
    assert times[-1] < 130.0
    start = 0.0
    for rate, duration in STAGES:
        got = np.count_nonzero((times >= start) & (times < start + duration))
        assert abs(got - rate * duration) <= 4 * math.sqrt(rate * duration) + 1, (rate, got)
        start += duration
    schedule = RateSchedule.stages(STAGES)
    assert schedule.end_s == 130.0 and schedule.cumulative(130.0) == pytest.approx(1100.0)
    assert schedule.inverse(200.0) == pytest.approx(40.0) and schedule.inverse(1000.0) == pytest.approx(80.0)


def test_stages_with_a_count_hold_the_last_rate_past_the_end():
    shape = Shape(stages=((10.0, 1.0),))
    times = arrival_times("stages", 1.0, 50, 0, "warmup", shape)
    assert len(times) == 50 and times[-1] > 1.0


def config(*overrides):
    return load_config(STREAM[0], list(overrides), BACKENDS, WORKLOADS)


def test_stages_replace_the_rates_by_their_mean_and_the_count_by_the_schedule():
    c = config("stream.arrival=stages", "stream.stages=[{rate: 5, duration_s: 40}, {rate: 20, duration_s: 40}]",
               "stream.num_requests=3")
    assert c.stream.request_rates == [12.5]
    timed = stream_arrivals(c.stream, 12.5, "timed")
    assert len(timed) > 800 and timed[-1] < 80.0
    assert len(stream_arrivals(c.stream, 12.5, "warmup")) == c.stream.num_warmup_requests


def test_gamma_and_ramp_keep_num_requests():
    c = config("stream.arrival=gamma", "stream.burstiness=0.5")
    assert len(stream_arrivals(c.stream, 4.0, "timed")) == c.stream.num_requests
    c = config("stream.arrival=ramp", "stream.ramp.start_rate=1", "stream.ramp.duration_s=5")
    assert len(stream_arrivals(c.stream, 4.0, "timed")) == c.stream.num_requests


BAD = {
    "negative burstiness": (["stream.arrival=gamma", "stream.burstiness=-1"],
                            "stream.burstiness: must be a finite number > 0, got -1"),
    "burstiness without gamma": (["stream.burstiness=2"], "stream.burstiness: shapes the gaps of stream.arrival: "
                                 "gamma; set it, or remove stream.burstiness"),
    "ramp without its keys": (["stream.arrival=ramp"], "stream.ramp.start_rate: required with stream.arrival: ramp "
                              "(the rate at t=0), a finite number of requests/s > 0"),
    "ramp of no time": (["stream.arrival=ramp", "stream.ramp.start_rate=1", "stream.ramp.duration_s=0"],
                        "stream.ramp.duration_s: must be a finite number of seconds > 0, got 0"),
    "ramp keys without ramp": (["stream.ramp.start_rate=1"],
                               "stream.ramp: is the ramp of stream.arrival: ramp; set it, or remove stream.ramp"),
    "stages missing": (["stream.arrival=stages"],
                       "stream.stages: required with stream.arrival: stages, a list of {rate, duration_s}"),
    "stage without duration": (["stream.arrival=stages", "stream.stages=[{rate: 1}]"],
                               "stream.stages[0].duration_s: required, a finite number of seconds > 0"),
    "negative stage rate": (["stream.arrival=stages", "stream.stages=[{rate: 2, duration_s: 5}, {rate: -1, "
                             "duration_s: 5}]"], "stream.stages[1].rate: must be a finite number of requests/s > 0, "
                                                 "got -1"),
    "stages without stages": (["stream.stages=[{rate: 1, duration_s: 5}]"], "stream.stages: is the schedule of "
                              "stream.arrival: stages; set it, or remove stream.stages"),
}


@pytest.mark.parametrize("overrides,message", BAD.values(), ids=BAD.keys())
def test_bad_shape_keys_exit_2_with_one_line(overrides, message, capsys):
    assert main([*STREAM, *overrides, "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_a_multi_turn_stream_with_stages_starts_a_conversation_per_scheduled_arrival(model):
    from harness.config.stream.arrival_keys import RateStage, validate_shape
    from harness.plan.points import SweepPoint
    from tests.replay import conversation_workload

    w, config = conversation_workload(model)
    config.stream.arrival, config.stream.stages = "stages", [RateStage(4.0, 2.0), RateStage(1.0, 1.0)]
    validate_shape(config.stream)
    rate = config.stream.request_rates[0]
    assert rate == pytest.approx(3.0)
    spec = w.stream(SweepPoint(w.input_lengths()[0], 6, None, w.name, rate), "timed", config.stream)
    starts = stream_arrivals(config.stream, rate, "timed")
    assert spec.turns is not None and len(set(spec.turns.conversation)) == len(starts)
    assert sorted(set(spec.arrivals_s)) == sorted(set(starts))


def test_a_folder_measured_before_these_keys_existed_still_resumes(tmp_path):
    """A results folder whose manifest predates burstiness, ramp and stages was measured with their defaults: resuming
    it with the defaults is allowed; asking for another arrival shape is refused, naming the key."""
    from app.resume import check_resumable
    from harness.config.sweep import to_plain
    from harness.errors import UserError

    loaded = config()
    older = to_plain(loaded)
    for key in ("burstiness", "ramp", "stages"):
        del older["stream"][key]
    check_resumable({"config": older}, loaded, tmp_path)
    with pytest.raises(UserError, match="was measured with stream.arrival="):
        check_resumable({"config": older}, config("stream.arrival=gamma", "stream.burstiness=0.5"),
                        tmp_path)

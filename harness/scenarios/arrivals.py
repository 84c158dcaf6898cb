"""Scheduled arrival times of a request stream: seeded, so every backend is offered the same stream.

The times depend on the arrival process (its shape: gamma's burstiness, a ramp, stages), the rate, the count and
the seed only. Every rate scales the same unit draws (common random numbers): the stream at 8 requests/s is the
stream at 1/s, eight times faster, so differences between rate points come from the rate, not from a different
draw. A ramp's or stages' rate changes over time: their times map the same unit draws through the schedule
(harness/scenarios/arrival_shapes.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from harness.scenarios.arrival_shapes import POISSON, RateSchedule, Shape, gamma_gaps, scheduled_times

if TYPE_CHECKING:
    from harness.config.stream import StreamConfig

PHASES = {"warmup": 0, "timed": 1}


def arrival_times(arrival: str, rate: float, count: Optional[int], seed: int, phase: str = "timed",
                  shape: Shape = POISSON) -> Tuple[float, ...]:
    """Offsets in seconds from the stream's start, non-decreasing, the first at 0.

    poisson: exponential gaps of mean 1/rate (a Poisson process); gamma: gamma gaps of mean 1/rate, coefficient of
    variation 1/sqrt(shape.burstiness); constant: gaps of exactly 1/rate; burst: every request at 0 (rate ignored:
    the offline-throughput case); ramp: a Poisson process whose rate rises linearly from shape.ramp's start rate to
    `rate` over its seconds, then holds; stages: a Poisson process of shape.stages' piecewise-constant rate (`rate`
    ignored). `count` None (stages only): every arrival before the last stage ends; with a count, the last stage's
    rate holds past its end.
    """
    if count is None and arrival != "stages":
        raise ValueError(f"arrival {arrival!r} needs a count")
    if arrival == "burst" or math.isinf(rate):
        return (0.0,) * (count or 0)
    if arrival == "constant":
        return tuple(i / rate for i in range(count or 0))
    if arrival not in ("poisson", "gamma", "ramp", "stages"):
        raise ValueError(f"unknown arrival process {arrival!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, PHASES[phase]], spawn_key=(2,)))
    if arrival == "ramp":
        assert shape.ramp is not None, "arrival: ramp needs its start rate and duration"
        return scheduled_times(rng, RateSchedule.ramp(*shape.ramp, rate), count)
    if arrival == "stages":
        schedule = RateSchedule.stages(shape.stages)
        return scheduled_times(rng, schedule, count, schedule.end_s)
    assert count is not None
    if arrival == "gamma":
        gaps = gamma_gaps(rng, shape.burstiness, count) / rate
    else:
        gaps = rng.exponential(1.0, size=count - 1) / rate if count > 1 else np.zeros(0)
    return (0.0, *np.cumsum(gaps).tolist())


def shape_of(stream: "StreamConfig") -> Shape:
    """The `stream` section's shape keys, as arrival_times takes them."""
    ramp = None
    if stream.ramp.start_rate is not None and stream.ramp.duration_s is not None:
        ramp = (float(stream.ramp.start_rate), float(stream.ramp.duration_s))
    # validate_stream has required every stage's rate and duration_s.
    stages = tuple((float(s.rate or 0), float(s.duration_s or 0)) for s in stream.stages)
    return Shape(float(stream.burstiness), ramp, stages)


def stream_arrivals(stream: "StreamConfig", rate: float, phase: str) -> Tuple[float, ...]:
    """A phase's arrival times under the `stream` section: num_warmup_requests warm-up ones, num_requests timed
    ones, or with arrival: stages the timed ones the schedule holds (num_requests is not used)."""
    if phase == "timed":
        count: Optional[int] = None if stream.arrival == "stages" else stream.num_requests
    else:
        count = stream.num_warmup_requests
    return arrival_times(stream.arrival, rate, count, stream.seed, phase, shape_of(stream))

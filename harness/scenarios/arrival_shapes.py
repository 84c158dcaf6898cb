"""The arrival processes beyond a constant-rate Poisson stream: gamma gaps, and a rate that changes over time (a
linear ramp, or consecutive stages of constant rate).

A changing rate is a piecewise-linear intensity lambda(t). Its arrivals come from time rescaling: the unit Poisson
stream's times s_k (the same seeded unit exponential draws a `poisson` stream uses, s_0 = 0) are mapped through the
inverse of the cumulative intensity, t_k = Lambda^-1(s_k). So the times are a Poisson process of rate lambda(t),
deterministic given the seed and phase, and the same draws underlie every rate.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class Shape:
    """What an arrival process needs beyond its rate: gamma's burstiness (shape), a ramp's (start rate, seconds),
    the stages' ((rate, seconds), ...)."""

    burstiness: float = 1.0
    ramp: Optional[Tuple[float, float]] = None
    stages: Tuple[Tuple[float, float], ...] = ()


POISSON = Shape()  # no shape beyond the rate


@dataclass(frozen=True)
class RateSchedule:
    """A piecewise-linear rate: segment i lasts durations[i] seconds and goes from starts[i] to ends[i] requests/s;
    after the last segment the rate holds at its end value."""

    durations: Tuple[float, ...]
    starts: Tuple[float, ...]
    ends: Tuple[float, ...]

    @classmethod
    def ramp(cls, start_rate: float, duration_s: float, rate: float) -> "RateSchedule":
        """From start_rate to rate, linearly, over duration_s; then rate."""
        return cls((duration_s,), (start_rate,), (rate,))

    @classmethod
    def stages(cls, stages: Tuple[Tuple[float, float], ...]) -> "RateSchedule":
        """(rate, duration_s) each, consecutive; the last rate holds after them."""
        return cls(tuple(d for _, d in stages), tuple(r for r, _ in stages), tuple(r for r, _ in stages))

    @property
    def end_s(self) -> float:
        """When the last segment ends."""
        return sum(self.durations)

    def _edges(self) -> Tuple[List[float], List[float]]:
        """Each segment's start time and the cumulative intensity there, plus the end's."""
        times, totals = [0.0], [0.0]
        for d, a, b in zip(self.durations, self.starts, self.ends):
            times.append(times[-1] + d)
            totals.append(totals[-1] + d * (a + b) / 2)
        return times, totals

    def rate_at(self, t: float) -> float:
        """lambda(t), requests/s."""
        times, _ = self._edges()
        i = bisect.bisect_right(times, t) - 1
        if i >= len(self.durations):
            return self.ends[-1]
        return self.starts[i] + (self.ends[i] - self.starts[i]) * (t - times[i]) / self.durations[i]

    def cumulative(self, t: float) -> float:
        """Lambda(t) = the integral of lambda from 0 to t: the expected arrivals in [0, t]."""
        times, totals = self._edges()
        i = bisect.bisect_right(times, t) - 1
        if i >= len(self.durations):
            return totals[-1] + self.ends[-1] * (t - times[-1])
        u, a = t - times[i], self.starts[i]
        return totals[i] + a * u + (self.ends[i] - a) * u * u / (2 * self.durations[i])

    def inverse(self, s: float) -> float:
        """Lambda^-1(s): the time by which s arrivals are expected."""
        times, totals = self._edges()
        i = bisect.bisect_right(totals, s) - 1
        if i >= len(self.durations):
            return times[-1] + (s - totals[-1]) / self.ends[-1]
        a, slope, left = self.starts[i], (self.ends[i] - self.starts[i]) / self.durations[i], s - totals[i]
        # slope * u^2 / 2 + a * u = left, in the form that stays exact as slope -> 0.
        return times[i] + 2 * left / (a + math.sqrt(max(a * a + 2 * slope * left, 0.0)))


def unit_times(rng: np.random.Generator, count: Optional[int], until: float = math.inf) -> np.ndarray:
    """The unit Poisson stream's times: 0, then cumulative unit exponential gaps; `count` of them, or (count None)
    every one below `until`, drawn in blocks from `rng` (the same draws, in order, either way)."""
    if count is not None:
        gaps = rng.exponential(1.0, size=count - 1) if count > 1 else np.zeros(0)
        return np.concatenate(([0.0], np.cumsum(gaps)))
    times = np.zeros(1)
    while times[-1] < until:
        block = int(until - times[-1] + 10 * math.sqrt(until) + 16)
        times = np.concatenate((times, times[-1] + np.cumsum(rng.exponential(1.0, size=block))))
    return times[times < until]


def gamma_gaps(rng: np.random.Generator, burstiness: float, count: int) -> np.ndarray:
    """count - 1 gaps of a unit-rate stream: gamma of shape `burstiness`, scale 1/burstiness (mean 1, coefficient
    of variation 1/sqrt(burstiness)), as vLLM's `bench serve --burstiness`. Shape 1 draws what `poisson` does."""
    return rng.gamma(burstiness, 1.0 / burstiness, size=max(count - 1, 0))


def scheduled_times(rng: np.random.Generator, schedule: RateSchedule, count: Optional[int],
                    until: float = math.inf) -> Tuple[float, ...]:
    """The arrivals of a Poisson process of rate `schedule`: `count` of them, or (count None) every one before
    `until` (the schedule's end)."""
    limit = schedule.cumulative(until) if count is None else math.inf
    return tuple(schedule.inverse(float(s)) for s in unit_times(rng, count, limit))

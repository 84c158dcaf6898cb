"""Scheduled arrival times of a request stream: seeded, so every backend is offered the same stream.

The times depend on the arrival process, the rate, the count and the seed only. Every rate scales
the same unit draws (common random numbers): the stream at 8 requests/s is the stream at 1/s, eight
times faster, so differences between rate points come from the rate, not from a different draw.
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np

PHASES = {"warmup": 0, "timed": 1}


def arrival_times(arrival: str, rate: float, count: int, seed: int, phase: str = "timed") -> Tuple[float, ...]:
    """Offsets in seconds from the stream's start, non-decreasing, the first at 0.

    poisson: exponential gaps of mean 1/rate (a Poisson process); constant: gaps of exactly 1/rate;
    burst: every request at 0 (rate ignored: the offline-throughput case).
    """
    if arrival == "burst" or math.isinf(rate):
        return (0.0,) * count
    if arrival == "constant":
        return tuple(i / rate for i in range(count))
    if arrival != "poisson":
        raise ValueError(f"unknown arrival process {arrival!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, PHASES[phase]], spawn_key=(2,)))
    gaps = rng.exponential(1.0, size=count - 1) / rate if count > 1 else np.zeros(0)
    return (0.0, *np.cumsum(gaps).tolist())

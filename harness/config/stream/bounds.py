"""A stream's schedule sized before anything runs: how many requests one point sends and how long its arrivals last.

Each key can be sane alone and the schedule absurd together (`stages` at 1e9 requests/s, 10,000 requests at 1/s, a
trace with a gap of 1e308 s). Found at run time, such a schedule is an allocation of terabytes or a worker silent
until point_timeout_s kills it; found here, it is one line with its numbers (docs/guides/troubleshooting.md).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from harness.errors import UserError

# The most requests one point may schedule (warm-up and timed): every request's prompt is drawn before the point
# starts, so a million 1,000-token prompts are already gigabytes of token ids.
MAX_REQUESTS_PER_POINT = 1_000_000


def check_schedule(stream: Any, point_timeout_s: float) -> None:
    """The schedule of every point of `stream` (a validated StreamConfig: rates as a list, or `auto`) against the
    size one point may have and the time point_timeout_s lets it run; UserError naming the key and the numbers."""
    if stream.arrival == "trace":
        return  # a trace's window is sized where it is read (check_trace_schedule)
    timed = _timed_count(stream)
    count = timed + stream.num_warmup_requests
    if count > MAX_REQUESTS_PER_POINT:
        key = "stream.stages" if stream.arrival == "stages" else "stream.num_requests"
        raise UserError(f"{key}: the schedule sends about {_count(count)} requests a point (warm-up included), more "
                        f"than the {MAX_REQUESTS_PER_POINT:,} a point may; send fewer")
    rate = stream.search.start_rate if stream.request_rates == "auto" else min(stream.request_rates)
    seconds = _seconds(stream, rate, timed) + _seconds(stream, rate, stream.num_warmup_requests, warmup=True)
    if seconds > point_timeout_s:
        raise UserError(f"stream: at {rate:g} requests/s the schedule's arrivals alone take about {_count(seconds)} s "
                        f"a "
                        f"point, longer than point_timeout_s ({point_timeout_s:g} s) lets a point run; send fewer "
                        "requests (num_requests, duration_s, stages), raise the rate, or raise point_timeout_s")


def check_trace_schedule(requests: Any, path: str, point_timeout_s: float) -> None:
    """A windowed trace's replay (its `TraceRequest`s, scaled) against the same bounds, naming its longest gap."""
    if len(requests) > MAX_REQUESTS_PER_POINT:
        raise UserError(f"stream.window: replays {len(requests):,} requests of {path}, more than the "
                        f"{MAX_REQUESTS_PER_POINT:,} a point may; narrow it (max_requests, duration_s)")
    span = requests[-1].time_s - requests[0].time_s
    if span > point_timeout_s:
        gap, i = max((b.time_s - a.time_s, i) for i, (a, b) in enumerate(zip(requests, requests[1:])))
        raise UserError(f"stream.trace: {path}: the replay lasts {span:,.6g} s (its longest gap: {gap:,.6g} s before "
                        f"line {requests[i + 1].line}), longer than point_timeout_s ({point_timeout_s:g} s) lets a "
                        "point run; narrow stream.window, lower stream.time_scale, or raise point_timeout_s")


def _count(x: float) -> str:
    """`10,004`, or `1e+300` past what anyone reads as digits."""
    return f"{x:,.0f}" if x < 1e12 else f"{x:.3g}"


def _timed_count(stream: Any) -> float:
    if stream.arrival == "stages":
        return sum(s.rate * s.duration_s for s in stream.stages)  # the expected count of its Poisson arrivals
    if stream.duration_s is not None and stream.request_rates != "auto":
        return min(stream.num_requests, max(stream.request_rates) * stream.duration_s + 1)
    return stream.num_requests


def _seconds(stream: Any, rate: float, count: float, warmup: bool = False) -> float:
    """About how long `count` arrivals at `rate` take under the stream's arrival process (their expected span)."""
    if count <= 1 or stream.arrival == "burst":
        return 0.0
    if stream.arrival == "stages":
        return sum(s.duration_s for s in stream.stages) if not warmup else count / _mean_stage_rate(stream)
    seconds = _ramp_seconds(stream.ramp.start_rate, stream.ramp.duration_s, rate, count) \
        if stream.arrival == "ramp" else (count - 1) / rate
    return seconds if stream.duration_s is None or warmup else min(seconds, stream.duration_s)


def _mean_stage_rate(stream: Any) -> float:
    return sum(s.rate * s.duration_s for s in stream.stages) / sum(s.duration_s for s in stream.stages)


def _ramp_seconds(start_rate: Optional[float], ramp_s: Optional[float], rate: float, count: float) -> float:
    """When the `count`-th arrival is expected on a rate rising linearly from start_rate to rate over ramp_s, then
    holding: the inverse of the arrivals expected by time t."""
    r0, t_ramp = float(start_rate or rate), float(ramp_s or 0.0)
    in_ramp = (r0 + rate) / 2 * t_ramp
    if count > in_ramp or t_ramp == 0:
        return t_ramp + (count - in_ramp) / rate
    slope = (rate - r0) / t_ramp
    if abs(slope) < 1e-12:
        return count / r0
    return (-r0 + math.sqrt(max(r0 * r0 + 2 * slope * count, 0.0))) / slope

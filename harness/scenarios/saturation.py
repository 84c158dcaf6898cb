"""Saturation of a stream point, and where a rate sweep stops raising the rate (docs/measurement.md, "Saturation").

A point is saturated when both hold:

- its requests completed more than `stream.saturation_margin` slower than they were offered: the completion rate,
  (completed - 1) / (last completion - first completion), under (1 - margin) x the offered rate, (requests - 1) /
  (last scheduled arrival - first). Both are rates of this point's own schedule and completions, so neither the
  draw of a Poisson stream nor the tail of latency after the last arrival counts as a shortfall;
- the requests in flight kept rising: their mean over the last third of the arrival window is at least one request
  above their mean over the first third. In flight is the server's requests running + waiting where it was scraped,
  else the client's own count at each arrival (requests due and not yet completed: those waiting at the client
  for a slot included).

Pure functions of a stream's timing; the runner applies them and skips the rates above a saturated one.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

from harness.scenarios.stream import ServerSeries, StreamTiming

# Fewer completed requests than this say nothing about a trend: the point is not judged.
MIN_REQUESTS = 6


@dataclass(frozen=True)
class Saturation:
    """`saturated`, and (when it is) why, with the figures the rule compared."""

    saturated: bool
    reason: str = ""


def judge(timing: StreamTiming, margin: float) -> Optional[Saturation]:
    """Whether the stream saturated its engine; None when it cannot be judged (too few completed requests, or every
    request due at once: a burst offers no rate)."""
    scheduled = sorted(r.scheduled_s for r in timing.requests)
    done = [r for r in timing.requests if r.ok and r.last_token_s is not None]
    span = scheduled[-1] - scheduled[0] if scheduled else 0.0
    if len(done) < MIN_REQUESTS or span <= 0:
        return None
    offered = (len(scheduled) - 1) / span
    ends = sorted(r.last_token_s for r in done if r.last_token_s is not None)
    completed = (len(ends) - 1) / (ends[-1] - ends[0]) if ends[-1] > ends[0] else math.inf
    trend = _server_trend(timing.server, timing.start_s, scheduled)
    source = "the server's running + waiting"
    if trend is None:
        trend, source = _client_trend(scheduled, sorted(r.scheduled_s for r in done), ends), "the client's count"
    early, late = trend
    short = completed < offered * (1 - margin)
    rising = late >= early + 1
    if not (short and rising):
        return Saturation(False)
    return Saturation(True, f"completed {completed:.3g}/s, {1 - completed / offered:.0%} under the {offered:.3g}/s "
                            f"offered (stream.saturation_margin {margin:g}); requests in flight rose from {early:.1f} to "
                            f"{late:.1f} ({source})")


def _client_trend(arrivals: Sequence[float], starts: Sequence[float], ends: Sequence[float]) -> Tuple[float, float]:
    """Mean requests in flight (due, not completed) at the arrivals of the first third and of the last third."""
    counts = [bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t) for t in arrivals]
    third = max(1, len(counts) // 3)
    return sum(counts[:third]) / third, sum(counts[-third:]) / third


def _server_trend(server: Optional[ServerSeries], start_s: float,
                  arrivals: Sequence[float]) -> Optional[Tuple[float, float]]:
    """The server's running + waiting requests, mean over the scrapes in the first and the last third of the arrival
    window; None without both series or without a scrape in each third."""
    if server is None:
        return None
    running, waiting = server.values.get("requests_running"), server.values.get("requests_waiting")
    if running is None or waiting is None:
        return None
    first, last = arrivals[0] - start_s, arrivals[-1] - start_s
    third = (last - first) / 3
    early: List[float] = []
    late: List[float] = []
    for t, run, wait in zip(server.times_s, running, waiting):
        if run is None or wait is None:
            continue
        if first <= t <= first + third:
            early.append(run + wait)
        elif last - third <= t <= last:
            late.append(run + wait)
    if not early or not late:
        return None
    return sum(early) / len(early), sum(late) / len(late)


@dataclass
class SaturationStop:
    """`stream.stop_at_saturation` in a rate sweep: per sweep key (lengths, cap, workload), the lowest rate that
    saturated, and the skip reason of a higher rate at that key."""

    enabled: bool
    lowest: Dict[Hashable, Tuple[float, str]] = field(default_factory=dict)

    def note(self, key: Hashable, rate: Optional[float], saturation: Optional[Saturation]) -> None:
        if rate is None or saturation is None or not saturation.saturated:
            return
        if key not in self.lowest or rate < self.lowest[key][0]:
            self.lowest[key] = (rate, saturation.reason)

    def skip_reason(self, key: Hashable, rate: Optional[float]) -> Optional[str]:
        found = self.lowest.get(key)
        if not self.enabled or found is None or rate is None or rate <= found[0]:
            return None
        return (f"not run: {found[0]:g}/s saturated the engine at these lengths and cap (stream.stop_at_saturation): "
                f"{found[1]}")

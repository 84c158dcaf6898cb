"""`stream.duration_s`: a point's timed requests ended by time instead of count (docs/measurement.md, "Request
streams").

The arrival process schedules `num_requests` requests as it always does; only those due before `duration_s` (from the
stream's start, its first request's scheduled arrival) are sent. Arrival offsets never decrease, so they are a prefix
of the stream: every engine, static batching included, is given that shorter stream and nothing else changes. In a
multi-turn stream a later turn carries its conversation's offset, so a conversation started within the bound runs
all its turns.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Optional

from harness.scenarios.stream import StreamSpec, Turns


def due_within(stream: StreamSpec, duration_s: Optional[float]) -> StreamSpec:
    """`stream` cut to the requests due before `duration_s` (at least the first, due at 0); itself when None or
    when every request is due in time."""
    if duration_s is None:
        return stream
    count = max(1, bisect.bisect_left(stream.arrivals_s, duration_s))
    if count == stream.num_requests:
        return stream
    r = stream.requests
    requests = dataclasses.replace(r, prompts=list(r.prompts[:count]), max_tokens=r.max_tokens[:count],
                                   seeds=r.seeds[:count], messages=r.messages[:count])
    turns = stream.turns
    if turns is not None:
        turns = Turns(turns.conversation[:count], turns.turn[:count], turns.follows[:count], turns.gap_s[:count])
    return StreamSpec(requests, stream.arrivals_s[:count], stream.max_concurrency, turns, release=stream.release)

"""Static batching of a request stream around any engine that runs one batch at a time.

What a plain server wrapped around `generate` does: requests queue from their scheduled arrival;
while the engine is idle the loop sleeps until the next request is due or the oldest waiting one
has waited `max_wait_s`; a batch starts when `max_batch_size` requests wait (or the stream's
`max_concurrency`, if smaller), when the oldest has waited `max_wait_s`, or when no more requests
will come. It takes the oldest waiting requests, as many as fit; requests that arrive while it
generates wait for the next batch, their clocks running (docs/measurement.md, "Request streams").
Scheduled on the host clock in the calling thread: generation and arrivals never run at once, so
there is nothing for them to compete over.
"""

from __future__ import annotations

import collections
import time
from typing import Callable, Dict, List, Sequence, Tuple

from harness.errors import is_oom
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.scenarios.stream import LEAD_S, RequestTiming, StreamSpec, StreamTiming, block_until

# One batch through the engine: its timing, with each sequence's first and last token stamps and its token ids, and
# the stamps of its decoding steps (step k: token k + 1 of every sequence still running), from which each request's
# inter-token gaps are taken.
Generate = Callable[[BatchSpec], Tuple[BatchTiming, Sequence[float]]]


def serve_static(stream: StreamSpec, generate: Generate, max_batch_size: int, max_wait_s: float) -> StreamTiming:
    """Run `stream` as static batches through `generate`; one RequestTiming per request, in index order.

    `dispatched_s`: when the loop saw the request due: the wake-up time for one that fell due while the loop
    slept (the send slip), its scheduled time for one that fell due while a batch generated (that queue is the
    server's). `sent_s`: its batch's start; `queued_s`: sent_s - scheduled_s. First and last token: the batch's
    per-sequence stamps; `token_gaps_s`: the step stamps between them.
    """
    n = stream.num_requests
    cap = min(max_batch_size, stream.max_concurrency or max_batch_size)
    start_s = time.perf_counter() + LEAD_S
    due = [start_s + offset for offset in stream.arrivals_s]
    dispatched: List[float] = [0.0] * n
    timings: Dict[int, RequestTiming] = {}
    waiting: collections.deque = collections.deque()
    upcoming = 0  # the next request not yet due
    last_batch_end_s = -float("inf")
    while upcoming < n or waiting:
        now = time.perf_counter()
        while upcoming < n and due[upcoming] <= now:
            dispatched[upcoming] = due[upcoming] if due[upcoming] <= last_batch_end_s else now
            waiting.append(upcoming)
            upcoming += 1
        if not waiting:
            block_until(due[upcoming])
            continue
        deadline = due[waiting[0]] + max_wait_s
        if len(waiting) < cap and now < deadline and upcoming < n:
            block_until(min(deadline, due[upcoming]))
            continue
        batch = [waiting.popleft() for _ in range(min(cap, len(waiting)))]
        for timing in _run_batch(generate, stream.requests, batch, due, dispatched):
            timings[timing.index] = timing
        last_batch_end_s = time.perf_counter()
    # The loop runs until every request has been in a batch, and each batch times all of its requests.
    return StreamTiming(start_s, time.perf_counter(), tuple(timings[i] for i in range(n)))


def _run_batch(generate: Generate, requests: BatchSpec, indices: List[int], due: List[float],
               dispatched: List[float]) -> List[RequestTiming]:
    """One batch of the stream's requests `indices`, and their timings. Running out of memory fails the stream
    (the point reads `oom`); another failure is those requests' error and the stream goes on."""
    sub = BatchSpec([requests.prompts[i] for i in indices], tuple(requests.max_tokens[i] for i in indices),
                    requests.forced, requests.sampling,
                    tuple(requests.seeds[i] for i in indices) if requests.seeds else ())
    sent_s = time.perf_counter()
    try:
        timing, stamps = generate(sub)
    except Exception as e:  # noqa: BLE001 - the batch's requests fail, the stream goes on
        if is_oom(e):
            raise
        error = f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]
        return [RequestTiming(i, due[i], dispatched[i], sent_s, input_tokens=len(requests.prompts[i]), error=error)
                for i in indices]
    firsts, lasts, ids = timing.request_first_token_s, timing.request_last_token_s, timing.token_ids
    assert firsts is not None and lasts is not None and ids is not None  # a Generate gives all three (see Generate)
    out = []
    for j, i in enumerate(indices):
        produced = timing.output_tokens[j]
        mine = stamps[:produced]
        out.append(RequestTiming(
            i, due[i], dispatched[i], timing.start_s, firsts[j], lasts[j],
            len(requests.prompts[i]), produced, tuple(b - a for a, b in zip(mine, mine[1:])),
            timing.start_s - due[i], token_ids=ids[j]))
    return out

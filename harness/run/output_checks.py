"""What an engine's output must be before its numbers count: every sequence of a batch back within its budget
(exactly it, when forced), every request of a stream back in order, failed ones marked and their share held to
stream.max_failed_share. A point that fails these is an error, never a row of meaningless figures."""

from __future__ import annotations

import dataclasses

from harness.errors import ShortOutputError
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.scenarios.stream import RequestTiming, StreamSpec, StreamTiming


def check_output(timing: BatchTiming, batch: BatchSpec) -> None:
    """A forced sequence that came back short, or any sequence over its budget, makes the point's numbers
    meaningless: fail the point rather than report them."""
    if len(timing.output_tokens) != batch.batch_size:
        raise ShortOutputError(f"got {len(timing.output_tokens)} outputs for a batch of {batch.batch_size}")
    for got, budget in zip(timing.output_tokens, batch.max_tokens):
        if batch.forced and got != budget:
            raise ShortOutputError(f"a sequence produced {got} tokens, {budget} were forced")
        if not 1 <= got <= budget:
            raise ShortOutputError(f"a sequence produced {got} tokens, outside 1..{budget}")


class StreamFailed(RuntimeError):
    """More of a stream's requests failed than stream.max_failed_share allows: the point is an error, and its
    requests (`timing`, failures marked) are still written."""

    def __init__(self, message: str, timing: StreamTiming):
        super().__init__(message)
        self.timing = timing


def judge_stream(timing: StreamTiming, stream: StreamSpec, max_failed_share: float) -> StreamTiming:
    """Every request must come back, in order; one that failed, or came back with a token count outside its budget
    (other than exactly it when forced), is a failed request. Returns the timing with those marked (`error`);
    raises StreamFailed, naming the first failure, when their share is over `max_failed_share`."""
    if len(timing.requests) != stream.num_requests:
        raise ShortOutputError(f"got {len(timing.requests)} request timings for a stream of {stream.num_requests}")
    assert [r.index for r in timing.requests] == list(range(stream.num_requests)), "requests out of order"
    judged = tuple(_judged(r, budget, stream.requests.forced)
                   for r, budget in zip(timing.requests, stream.requests.max_tokens))
    timing = dataclasses.replace(timing, requests=judged)
    failed = [r for r in judged if not r.ok]
    if len(failed) > max_failed_share * stream.num_requests:
        first = failed[0]
        raise StreamFailed(f"{len(failed)} of {stream.num_requests} requests failed (stream.max_failed_share: "
                           f"{max_failed_share:g}); request {first.index}: {first.error}", timing)
    return timing


def _judged(r: RequestTiming, budget: int, forced: bool) -> RequestTiming:
    if not r.ok:
        return r if r.error else dataclasses.replace(r, error="no tokens came back")
    if r.inputs is not None:  # embeddings or rerank: an answer with no output tokens (the client checked its items)
        return r if r.output_tokens == 0 else dataclasses.replace(r, error=f"ShortOutputError: {r.output_tokens} "
                                                                           "output tokens from a pooling request")
    if forced and r.output_tokens != budget:
        return dataclasses.replace(r, error=f"ShortOutputError: {r.output_tokens} tokens, {budget} were forced")
    if not 1 <= r.output_tokens <= budget:
        return dataclasses.replace(r, error=f"ShortOutputError: {r.output_tokens} tokens, outside 1..{budget}")
    return r

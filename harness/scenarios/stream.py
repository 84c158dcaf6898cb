"""Request streams: what a backend is given in `scenario: stream`, what it hands back, and the arrival loop.

A stream is a list of requests with scheduled arrival offsets. Every request's clock starts at its
scheduled arrival, not when the client got round to sending it, so a late client or a full queue
shows up as latency instead of hiding (coordinated omission; docs/measurement.md, "Request streams").

Engines with an async API (vLLM's AsyncLLM, an HTTP server) use `drive`, which releases each request
at its scheduled time on an asyncio loop (woken as `stream.release` says, by default by a kernel timer:
harness/scenarios/release.py); engines that batch on their own clock (HF static batching) schedule themselves and
fill in the same `RequestTiming`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

from harness.scenarios.batch import BatchSpec, SpecCounts
# block_until: static batching's thread waits with it (harness/scenarios/static_batching.py imports it from here).
from harness.scenarios.release import DEFAULT_POLICY, ReleaseClock, block_until as block_until

# The first request is scheduled this far after `drive` starts, so that setting up costs no request its clock.
LEAD_S = 0.005


@dataclass(frozen=True)
class Turns:
    """Multi-turn conversations (docs/measurement.md, "Multi-turn conversations"): request i is turn `turn[i]`
    (1-based) of conversation `conversation[i]`. A first turn arrives at its scheduled offset; a later one `gap_s[i]`
    after the last token of the turn before it (`follows[i]`), and carries that turn's prompt, its actual answer and
    its own new tokens (`requests.prompts[i]`) or message (`requests.messages[i]`)."""

    conversation: Tuple[int, ...]
    turn: Tuple[int, ...]
    follows: Tuple[Optional[int], ...]
    gap_s: Tuple[float, ...]

    def next_of(self, index: int) -> Optional[int]:
        following = index + 1  # a conversation's turns are consecutive requests
        return following if following < len(self.follows) and self.follows[following] == index else None


@dataclass(frozen=True)
class StreamSpec:
    """Requests in arrival order: `requests` holds each one's prompt, budget, sampling and seed;
    `arrivals_s` their scheduled offsets from the stream's start (non-decreasing; a later turn's is its
    conversation's); `max_concurrency` caps the requests in flight (None: no cap), the rest wait at the client with
    their clocks running. `turns`: the conversations, in a multi-turn stream; `drive` builds each later turn's prompt
    as its turn before ends (`prompt_ids`, `chat_messages` are what an engine sends). `release`: how `drive` waits
    for each request's time (`stream.release`: harness/scenarios/release.py's POLICIES). `answer_ids`: the caller
    reads each answer's token ids (accuracy scoring), so a server that can hand them back is asked to. `adapters`:
    the LoRA adapter each request names (harness/scenarios/adapter_mix.py); () for the model alone.
    `traced_adapters`: a replayed trace's adapter index per request, where its every request gives one."""

    requests: BatchSpec
    arrivals_s: Tuple[float, ...]
    max_concurrency: Optional[int] = None
    turns: Optional[Turns] = None
    release: str = DEFAULT_POLICY
    answer_ids: bool = False
    adapters: Tuple[str, ...] = ()
    traced_adapters: Tuple[int, ...] = ()
    _built_ids: Dict[int, List[int]] = field(default_factory=dict, compare=False, repr=False)
    _built_messages: Dict[int, Tuple[Tuple[str, str], ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        assert len(self.arrivals_s) == self.requests.batch_size, "one arrival per request"
        assert not self.adapters or len(self.adapters) == self.requests.batch_size, "one adapter per request"

    @property
    def num_requests(self) -> int:
        return self.requests.batch_size

    def prompt_ids(self, index: int) -> List[int]:
        """The token ids request `index` is sent with: a later turn's whole history, once built. RuntimeError for a
        later turn whose turn before gave no answer ids (a server that streams text only)."""
        if self.turns is not None and not self.has_history(index):
            raise RuntimeError(f"turn {self.turns.turn[index]} needs the token ids of the answer before it, and the "
                               "engine sent text only (a server: ask for token ids, or use endpoint: chat)")
        built = self._built_ids.get(index)
        return built if built is not None else list(self.requests.prompts[index])

    def chat_messages(self, index: int) -> Tuple[Tuple[str, str], ...]:
        """The conversation request `index` is sent with, for servers that apply their own template."""
        return self._built_messages.get(index, self.requests.messages[index] if self.requests.messages else ())

    def continue_turn(self, index: int, answer_ids: Optional[Sequence[int]], answer_text: Optional[str]) -> None:
        """Build later turn `index`'s prompt from the turn before it (`turns.follows[index]`) and that turn's answer:
        its ids with the answer's ids, then this turn's own; its messages with the answer as the assistant's."""
        previous = self.turns.follows[index] if self.turns is not None else None
        assert previous is not None, "only a later turn continues the turn before it"
        if answer_ids is not None:
            self._built_ids[index] = self.prompt_ids(previous) + list(answer_ids) + list(self.requests.prompts[index])
        if answer_text is not None and self.requests.messages:
            self._built_messages[index] = (self.chat_messages(previous) + (("assistant", answer_text),)
                                           + tuple(self.requests.messages[index]))

    def has_history(self, index: int) -> bool:
        """Whether later turn `index` has its token ids built (its turn before gave the answer's ids)."""
        return self.turns is None or self.turns.follows[index] is None or index in self._built_ids


@dataclass(frozen=True)
class RequestTiming:
    """One request, host-clock (`time.perf_counter`) seconds.

    `scheduled_s`: when it was due; its latencies start here. `dispatched_s`: when the client released it
    (the send slip is `dispatched_s - scheduled_s`). `sent_s`: when it reached the engine (after waiting
    for a concurrency slot, or for a static batch to start). `first_token_s`, `last_token_s`: its first
    and last output tokens. `token_gaps_s`: time between consecutive token arrivals after the first, as
    the engine hands them over (several tokens may come at once: one gap per hand-over).
    `queued_s`: time the engine reports it spent waiting to be scheduled, where it reports one.
    `input_tokens`: the prompt's length as the engine or server counted it (a server applying its own chat template
    may count otherwise than the harness). `output_tokens_source`: where `output_tokens` comes from: `engine` (its
    token ids), a server's `usage`, its text re-tokenized (`tokenizer`), or one per SSE chunk (`chunks`).
    `cached_tokens`: prompt tokens the engine served from its prefix cache, where it says (None: it does not).
    `conversation`, `turn`: where the request sits in a multi-turn stream (None in a stream of single requests).
    `answer_valid`: whether its answer parsed as JSON and met the workload's `json_schema`, or called its `tools` as
    they take (None: neither).
    `reasoning_tokens`: output tokens the engine streamed as reasoning apart from the answer (None: none streamed);
    `first_answer_token_s`: the answer's first token, after the reasoning (None without one).
    `inputs`: the inputs an embeddings or rerank request carried (its documents, for rerank), whose answer comes
    whole: its first and last "token" are the answer's arrival and it has no output tokens (None: it generated).
    `adapter`: the LoRA adapter it named (None: the model alone). `images`: (width, height) of each image it carried.
    """

    index: int
    scheduled_s: float
    dispatched_s: float
    sent_s: float
    first_token_s: Optional[float] = None
    last_token_s: Optional[float] = None
    input_tokens: int = 0
    output_tokens: int = 0
    token_gaps_s: Tuple[float, ...] = field(default=(), repr=False)
    queued_s: Optional[float] = None
    error: str = ""
    token_ids: Optional[Tuple[int, ...]] = field(default=None, repr=False)
    output_tokens_source: str = "engine"
    cached_tokens: Optional[int] = None
    conversation: Optional[int] = None
    turn: Optional[int] = None
    answer_valid: Optional[bool] = None
    reasoning_tokens: Optional[int] = None
    first_answer_token_s: Optional[float] = None
    inputs: Optional[int] = None
    adapter: Optional[str] = None
    images: Tuple[Tuple[int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.error and self.first_token_s is not None and self.last_token_s is not None


# The server's own series, where a backend scrapes them from a server: gauges, then counters; kv_cache_usage is a
# fraction of the KV cache in use.
SERVER_SERIES = ("requests_running", "requests_waiting", "kv_cache_usage", "preemptions", "prefix_cache_hits",
                 "prefix_cache_queries")


@dataclass(frozen=True)
class ServerSeries:
    """What the server reported while a stream ran, one scrape per time: `times_s` from the stream's start (a
    first scrape may come before it); `values[name]` (SERVER_SERIES), None where the server has no such metric."""

    times_s: Tuple[float, ...]
    values: Dict[str, Tuple[Optional[float], ...]]


@dataclass(frozen=True)
class StreamTiming:
    """A whole stream: `start_s` is its time zero (request i is due at start_s + arrivals_s[i]); `spec`: the
    speculative-decoding counters of its requests, from an entry that speculates; `server`: the server's own
    series, from an entry that scrapes them."""

    start_s: float
    end_s: float
    requests: Tuple[RequestTiming, ...]
    spec: Optional[SpecCounts] = None
    server: Optional[ServerSeries] = field(default=None, repr=False)


class TokenClock:
    """Stamps a request's token hand-overs as they arrive; what `drive`'s submit callbacks fill in."""

    def __init__(self):
        self.stamps: List[float] = []
        self.tokens = 0

    def arrived(self, count: int = 1) -> None:
        if count > 0:
            self.stamps.append(time.perf_counter())
            self.tokens += count

    @property
    def first_s(self) -> Optional[float]:
        return self.stamps[0] if self.stamps else None

    @property
    def last_s(self) -> Optional[float]:
        return self.stamps[-1] if self.stamps else None

    def gaps_s(self) -> Tuple[float, ...]:
        return tuple(b - a for a, b in zip(self.stamps, self.stamps[1:]))


@dataclass
class Submitted:
    """What a submit callback returns for one request; `drive` adds the clock times it owns. `input_tokens`: the
    server's count of the prompt, where it gives one (else the prompt's own length is taken)."""

    first_token_s: Optional[float]
    last_token_s: Optional[float]
    output_tokens: int
    token_gaps_s: Sequence[float] = ()
    queued_s: Optional[float] = None
    token_ids: Optional[Tuple[int, ...]] = None
    input_tokens: Optional[int] = None
    output_tokens_source: str = "engine"
    cached_tokens: Optional[int] = None
    text: Optional[str] = field(default=None, repr=False)  # the answer's text, where a later turn needs it (chat)
    answer_valid: Optional[bool] = None  # the answer against the workload's json_schema or tools, where it has one
    reasoning_tokens: Optional[int] = None  # streamed as reasoning apart from the answer, where the engine does
    first_answer_token_s: Optional[float] = None
    inputs: Optional[int] = None  # an embeddings or rerank request's inputs; its answer came whole
    images: Tuple[Tuple[int, int], ...] = ()  # (width, height) of each image sent with the text


# submit(index) sends request `index` of the stream and returns when its last token has arrived.
Submit = Callable[[int], Awaitable[Submitted]]


async def drive(stream: StreamSpec, submit: Submit) -> StreamTiming:
    """Release every request at its scheduled time, whatever is in flight, and collect their timings.

    A request that raises gets an `error` and the rest go on: the point fails as a whole later, with
    every request accounted for. With `max_concurrency`, released requests wait for a free slot. In a
    multi-turn stream each conversation runs as one task: a later turn is due its gap after the turn
    before it ended, and is sent with that turn's prompt and answer in front of its own. Releases wake as the
    stream's `release` policy says (`ReleaseClock`): by default on a kernel timer, on time to within the kernel's
    wake-up, with nothing running between them.
    """
    clock = ReleaseClock(asyncio.get_running_loop(), stream.release)
    try:
        return await _drive(stream, submit, clock)
    finally:
        clock.close()


async def _drive(stream: StreamSpec, submit: Submit, clock: ReleaseClock) -> StreamTiming:
    slots = asyncio.Semaphore(stream.max_concurrency) if stream.max_concurrency else None
    start_s = time.perf_counter() + LEAD_S
    turns = stream.turns

    async def one(index: int, scheduled_s: float, dispatched_s: float) -> Tuple[RequestTiming, Optional[Submitted]]:
        conv, turn = (None, None) if turns is None else (turns.conversation[index], turns.turn[index])
        adapter = stream.adapters[index] if stream.adapters else None
        if slots is not None:
            await slots.acquire()
        sent_s = time.perf_counter()
        try:
            got = await submit(index)
        except Exception as e:  # noqa: BLE001 - any engine or transport failure is this request's error
            return RequestTiming(index, scheduled_s, dispatched_s, sent_s, input_tokens=_prompt_length(stream, index),
                                 error=f"{type(e).__name__}: {' '.join(str(e).split())}"[:300],
                                 conversation=conv, turn=turn, adapter=adapter), None
        finally:
            if slots is not None:
                slots.release()
        input_tokens = _prompt_length(stream, index) if got.input_tokens is None else got.input_tokens
        return RequestTiming(index, scheduled_s, dispatched_s, sent_s, got.first_token_s, got.last_token_s,
                             input_tokens, got.output_tokens, tuple(got.token_gaps_s), got.queued_s,
                             token_ids=got.token_ids, output_tokens_source=got.output_tokens_source,
                             cached_tokens=got.cached_tokens, conversation=conv, turn=turn,
                             answer_valid=got.answer_valid, reasoning_tokens=got.reasoning_tokens,
                             first_answer_token_s=got.first_answer_token_s, inputs=got.inputs,
                             adapter=adapter, images=tuple(got.images)), got

    async def conversation(index: int, scheduled_s: float, dispatched_s: float) -> List[RequestTiming]:
        timings = []
        while True:
            timing, got = await one(index, scheduled_s, dispatched_s)
            timings.append(timing)
            following = turns.next_of(index) if turns is not None else None
            if turns is None or following is None:
                return timings
            if not timing.ok:
                return timings + _abandoned(turns, following, f"turn {turns.turn[index]} of its conversation failed")
            assert got is not None and timing.last_token_s is not None  # it is ok: it returned, with a last token
            stream.continue_turn(following, got.token_ids, got.text)
            index, scheduled_s = following, timing.last_token_s + turns.gap_s[following]
            await clock.until(scheduled_s)
            dispatched_s = time.perf_counter()

    tasks = []
    for index, offset in enumerate(stream.arrivals_s):
        if turns is not None and turns.follows[index] is not None:
            continue  # a later turn: its conversation's task sends it
        scheduled_s = start_s + offset
        await clock.until(scheduled_s)
        tasks.append(asyncio.ensure_future(conversation(index, scheduled_s, time.perf_counter())))
    timings = sorted((t for group in await asyncio.gather(*tasks) for t in group), key=lambda t: t.index)
    return StreamTiming(start_s, time.perf_counter(), tuple(timings))


def _prompt_length(stream: StreamSpec, index: int) -> int:
    """The harness's count of the prompt request `index` was sent with (a later turn's: its history too)."""
    if stream.turns is not None and stream.has_history(index):
        return len(stream.prompt_ids(index))
    return stream.requests.input_tokens[index]


def _abandoned(turns: Turns, index: int, reason: str) -> List[RequestTiming]:
    """Request `index` and the later turns of its conversation, failed unsent: the turn before them failed."""
    timings, now = [], time.perf_counter()
    at: Optional[int] = index
    while at is not None:
        timings.append(RequestTiming(at, now, now, now, error=f"not sent: {reason}",
                                     conversation=turns.conversation[at], turn=turns.turn[at]))
        at = turns.next_of(at)
    return timings


@contextlib.contextmanager
def paused_gc():
    """The cyclic garbage collector paused for a stream (reference counting still frees nearly everything): a full
    collection over thousands of pending tasks stalls the loop for milliseconds, which would land on some request's
    send slip. It runs once before and once after instead."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.collect()


def run_stream(stream: StreamSpec, submit: Submit, loop: Optional[asyncio.AbstractEventLoop] = None) -> StreamTiming:
    """`drive` on `loop` (a backend keeps one for its engine's lifetime) or on a fresh one, the collector paused."""
    with paused_gc():
        if loop is None:
            return asyncio.run(drive(stream, submit))
        return loop.run_until_complete(drive(stream, submit))

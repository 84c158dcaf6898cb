"""`synthetic`: the null engine, which computes nothing. Every sequence of a batch, and every request of a stream, gets its whole
output budget after a set time to first token and a set time per further token, slept, not computed.

What it is for: the harness measured alone. A sweep on it exercises everything around an engine (planning, workers,
the runner, resume, search, the CSVs, charts, compare) in seconds and with no model loaded, so the tests of those
paths and a newcomer's first look need no engine; and its figures are known in advance, so they show what the harness
adds to them (docs/measurement.md, "What the harness itself costs"). It is also the smallest complete engine: the
checklist for a new one (docs/architecture.md, "Adding a plug-in") is this file, its line in backends/registry.py,
its rows in docs/guides/engines.md and its tests (tests/test_synthetic_engine.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Optional, Sequence, Set, Tuple

from backends.base import Backend, BackendOptions, Placement
from harness.fields import WEEK_S, opt
from harness.model.memory import MemoryEstimate
from harness.model.spec import ModelSpec
from harness.scenarios.batch import BatchSpec, BatchTiming
from harness.scenarios.stream import StreamSpec, StreamTiming, Submitted, run_stream


@dataclass
class SyntheticOptions(BackendOptions):
    ttft_ms: float = opt(
        1.0, ge=0, le=WEEK_S * 1e3, unit="ms", help="Time to first token of every batch and request, slept.")
    tpot_ms: float = opt(
        0.5, ge=0, le=WEEK_S * 1e3, unit="ms", help="Time per further output token (a batch's decode step), slept.")
    prefix_caching: bool = opt(False, help="Keep every stream prompt it has served and report a prompt it has seen "
                               "before as wholly cached (cached_tokens), until the runner resets the cache before a "
                               "point: the bookkeeping of a prefix cache, with no KV behind it.")


class SyntheticBackend(Backend[SyntheticOptions]):
    """Batches and streams answered on time, with nothing loaded and nothing computed."""

    Options = SyntheticOptions
    uses_hf_config = False  # nothing is built from the model's config
    runs_the_model = False  # no roofline: its times are set, not bound by the hardware
    scenarios = ("batch", "stream")

    @classmethod
    def resolve_placement(cls, options: SyntheticOptions) -> Placement:
        return Placement(device="cpu")

    @classmethod
    def estimate_memory(cls, options: SyntheticOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """It holds no weights and no KV cache: the memory guard never skips its points."""
        return MemoryEstimate(0, 0, 0)

    def load(self) -> None:
        """Nothing to load."""
        self.seen_prompts: Set[Tuple[int, ...]] = set()  # prefix_caching: the prompts served since the last reset

    def reset_prefix_cache(self) -> None:
        self.seen_prompts.clear()

    def run(self, batch: BatchSpec) -> BatchTiming:
        """Every sequence produces its whole budget: the first tokens after ttft_ms, then one step per tpot_ms."""
        steps = max(batch.max_tokens) - 1
        start = time.perf_counter()
        time.sleep(self.options.ttft_ms / 1e3)
        first = time.perf_counter()
        time.sleep(steps * self.options.tpot_ms / 1e3)
        last = time.perf_counter()
        return BatchTiming(start, first, last, last, tuple(batch.max_tokens),
                           token_ids=tuple(_tokens(n) for n in batch.max_tokens))

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """Each request is answered on its own, as if the engine had room for all of them at once."""
        budgets = stream.requests.max_tokens

        async def submit(index: int) -> Submitted:
            n, cached = budgets[index], self._cached_tokens(stream.prompt_ids(index))
            await asyncio.sleep(self.options.ttft_ms / 1e3)
            first = time.perf_counter()
            await asyncio.sleep((n - 1) * self.options.tpot_ms / 1e3)
            return Submitted(first_token_s=first, last_token_s=time.perf_counter(), output_tokens=n,
                             token_ids=_tokens(n), cached_tokens=cached)

        return run_stream(stream, submit)

    def _cached_tokens(self, prompt: Sequence[int]) -> Optional[int]:
        """With prefix_caching, the whole prompt if it was served before, else 0 (then it is remembered); without,
        None: the engine does not say."""
        if not self.options.prefix_caching:
            return None
        key = tuple(prompt)
        cached = len(key) if key in self.seen_prompts else 0
        self.seen_prompts.add(key)
        return cached


def _tokens(n: int) -> Tuple[int, ...]:
    """The ids it "generates": the same for every engine run, so greedy cross-checks between two synthetic entries agree."""
    return tuple(range(1, n + 1))

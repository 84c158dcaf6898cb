"""What a backend is given for one batch and what it hands back: host-clock timestamps.

All timestamps are `time.perf_counter()` seconds of the process that calls `run`; a
backend on an accelerator synchronizes the device before reading the clock, so a
stamp means "the work before it is done", not "the work before it was queued".
The definitions of TTFT and TPOT below are the product's contract (DESIGN.md section 2)
and the same for every backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass(frozen=True)
class BatchSpec:
    """`batch_size` prompts of equal length, submitted together, each to produce exactly `output_length` tokens."""

    prompts: List[List[int]]
    output_length: int

    @property
    def batch_size(self) -> int:
        return len(self.prompts)

    @property
    def input_length(self) -> int:
        return len(self.prompts[0])


@dataclass(frozen=True)
class BatchTiming:
    """Host-clock stamps of one batch, plus what it produced.

    `first_token_s`: every sequence of the batch has its first output token (prefill done).
    `last_token_s`: the batch's last output token has arrived.
    `output_tokens`: tokens each sequence actually produced, checked against the request.
    `request_ttfts_s`: per-sequence first-token delays, where the engine reports them.
    `token_ids`: the generated ids per sequence, for cross-checking engines (not timed, not written per batch).
    """

    start_s: float
    first_token_s: float
    last_token_s: float
    end_s: float
    output_tokens: Tuple[int, ...]
    request_ttfts_s: Optional[Tuple[float, ...]] = field(default=None)
    token_ids: Optional[Tuple[Tuple[int, ...], ...]] = field(default=None, repr=False)

    @property
    def latency_ms(self) -> float:
        return (self.end_s - self.start_s) * 1e3

    @property
    def ttft_ms(self) -> float:
        return (self.first_token_s - self.start_s) * 1e3

    def tpot_ms(self, output_length: int) -> Optional[float]:
        """Decode time per token after the first; undefined for a single output token."""
        if output_length < 2:
            return None
        return (self.last_token_s - self.first_token_s) * 1e3 / (output_length - 1)

"""The plan's data: a sweep point (one shape), a planned point (its estimate or why it is skipped), an entry's plan.

Everything below the app (records, workloads, backends, the runner) speaks of points in these terms; planning itself
is harness/plan/sweep.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from harness.model.memory import MemoryEstimate


@dataclass(frozen=True)
class SweepPoint:
    """One shape of the sweep: a static batch (`batch_size`) or a request stream (`request_rate`).

    `workload` names what the prompts are (`random`, or a prompt file with its template). For a prompt
    file, `input_length` is the mean prompt length of the prompts the sweep draws from, and
    `output_length` the output budget (forced, or a cap when EOS may stop a sequence).
    A stream point has no batch size: its offered `request_rate` (requests/s; inf for a burst, every
    request at once; None for `request_rates: auto`, a search over rates) and `max_concurrency`
    (None: no cap) take its place.
    `batch_sizes: auto` plans one batch point per length pair without a batch size (`batch_search`): the
    runner searches for the largest batch that runs (harness/scenarios/batch_search.py) and reports each batch it
    tried as a point of its own.
    """

    input_length: int
    output_length: int
    batch_size: Optional[int]
    workload: str = "random"
    request_rate: Optional[float] = None
    max_concurrency: Optional[int] = None
    batch_search: bool = False

    @property
    def scenario(self) -> str:
        return "batch" if self.batch_size is not None or self.batch_search else "stream"

    @property
    def rate_search(self) -> bool:
        """`request_rates: auto`: the point searches for the highest rate within the SLO."""
        return self.scenario == "stream" and self.request_rate is None

    @property
    def sort_key(self) -> tuple:
        """Lengths, then batch size or rate, then the cap (none last): load grows within a length pair."""
        cap = math.inf if self.max_concurrency is None else self.max_concurrency
        return (self.input_length, self.output_length, self.batch_size or 0, self.request_rate or 0.0, cap,
                self.workload)

    def describe(self) -> str:
        """`bs=8 in=128 out=64`, or `rate=4/s in=128 out=64` (`cap=8` when capped), for console lines."""
        if self.scenario == "batch":
            load = "bs=auto" if self.batch_search else f"bs={self.batch_size}"
        elif self.request_rate is None:  # rate_search
            load = "rate=auto"
        else:
            load = "burst" if math.isinf(self.request_rate) else f"rate={self.request_rate:g}/s"
            load += f" cap={self.max_concurrency}" if self.max_concurrency else ""
        return f"{load} in={self.input_length} out={self.output_length}"


@dataclass(frozen=True)
class SweepShape:
    """The largest shapes of a sweep, for engines that size buffers up front (vLLM, DeepSpeed)."""

    max_batch_size: int  # in a stream: the largest max_concurrency (0: no cap, the engine's own limit)
    max_input_length: int
    max_output_length: int
    scenario: str = "batch"
    probe_logits: bool = False  # the entry hands over logits probes (EntryPlan.probe_logits): an engine may need setup

    @property
    def max_tokens(self) -> int:
        return self.max_input_length + self.max_output_length


@dataclass(frozen=True)
class PlannedPoint:
    point: SweepPoint
    estimate: MemoryEstimate  # a batch search's: at one sequence
    skip_reason: Optional[str] = None
    over_memory: bool = False  # skipped because the estimate exceeds the budget
    search: Optional[BatchSearchPlan] = None  # batch_sizes: auto

    @property
    def max_batch(self) -> int:
        """The most sequences the point hands the engine at once (0: a stream without a cap)."""
        return self.search.limit if self.search else concurrency(self.point)


@dataclass(frozen=True)
class BatchSearchPlan:
    """Where a `batch_sizes: auto` search starts (the planner's estimate, at most max_batch_size) and the
    largest batch it may try: max_batch_size on a GPU, where the search may go past the estimate because an
    out-of-memory error is caught there; on a host also the estimate, because running out of host memory kills
    processes instead of raising."""

    start: int
    limit: int
    limit_reason: str  # for the search's row when it stops there


def concurrency(point: SweepPoint) -> int:
    """Sequences an engine may hold at once for this point: the batch (1 for a batch search, the least it
    tries), or a stream's cap (0: no cap)."""
    if point.scenario == "batch":
        return point.batch_size or 1
    return point.max_concurrency or 0

"""`batch_sizes: auto`: the largest static batch an engine runs at each length pair.

The search starts at the plan's estimate (harness/plan/sweep.py, `plan_batch_search`), doubles while batches
run, and bisects between the largest batch that ran and the smallest that did not (out of memory, or skipped:
over the memory estimate on a host, beyond the engine's own limits) until they are adjacent, or until a batch of
`max_batch_size` ran. Pure bookkeeping, like harness/scenarios/rate_search.py: the runner measures each probe as an
ordinary batch point and reports whether it ran.

`largest_fitting` is the same search over the memory estimate instead of real runs: where the search starts
(harness/plan/sweep.py) and the `--plan` table (harness/plan/capacity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

# With `batch_sizes: auto` and no `max_batch_size`: vLLM's default max_num_seqs on the largest GPUs; a bigger
# static batch is rarely what anyone serves, and engines size buffers for the largest batch up front.
DEFAULT_MAX_BATCH_SIZE = 1024


@dataclass
class BatchSearch:
    start: int
    limit: int  # the search never probes past it (harness/plan/sweep.py, BatchSearchPlan)
    limit_reason: str = ""
    largest_ok: Optional[int] = None
    smallest_failed: Optional[int] = None
    probes: List[Tuple[int, str]] = field(default_factory=list)  # (batch size, the probe's status)

    def __post_init__(self):
        self.start = max(1, min(self.start, self.limit))

    def next_batch(self) -> Optional[int]:
        """The batch size to probe next, or None when the search is done."""
        ok, failed = self.largest_ok, self.smallest_failed
        if ok is None:
            if failed is None:
                return self.start
            return failed // 2 if failed > 1 else None
        if failed is None:
            return min(ok * 2, self.limit) if ok < self.limit else None
        return (ok + failed) // 2 if failed - ok > 1 else None

    def record(self, batch_size: int, status: str) -> None:
        self.probes.append((batch_size, status))
        if status == "ok":
            self.largest_ok = max(batch_size, self.largest_ok or batch_size)
        else:
            self.smallest_failed = min(batch_size, self.smallest_failed or batch_size)

    def describe(self) -> str:
        """`probes: 64 ok, 128 oom, 96 skipped, ...`, and why the search stopped where the limit bounded it."""
        probes = "probes: " + ", ".join(f"{size} {status}" for size, status in self.probes)
        if self.largest_ok is None:
            return f"{probes}; not even one sequence ran"
        if self.largest_ok == self.limit:
            return f"{probes}; stopped at the limit: {self.limit_reason}"
        return probes


# The search stops here: a batch this large fits any plausible model only on a machine the estimate cannot judge.
MAX_PLANNED_BATCH = 1 << 16


def largest_fitting(fits: Callable[[int], bool], limit: int = MAX_PLANNED_BATCH) -> int:
    """The largest n in 1..limit with fits(n), for a `fits` that turns false and stays false as n grows; 0: none."""
    if not fits(1):
        return 0
    low = 1
    while low < limit and fits(min(low * 2, limit)):
        low = min(low * 2, limit)
    high = min(low * 2, limit + 1)  # fits(low); not fits(high), or high is past the limit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low

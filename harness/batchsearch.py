"""`batch_sizes: auto`: the largest static batch an engine runs at each length pair.

The search starts at the planner's estimate (harness/planner.py), doubles while batches run, and bisects
between the largest batch that ran and the smallest that did not (out of memory, or skipped: over the
memory estimate on a host, beyond the engine's own limits) until they are adjacent, or until a batch of
`max_batch_size` ran. Pure bookkeeping, like harness/ratesearch.py: the runner measures each probe as an
ordinary batch point and reports whether it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

# With `batch_sizes: auto` and no `max_batch_size`: vLLM's default max_num_seqs on the largest GPUs; a bigger
# static batch is rarely what anyone serves, and engines size buffers for the largest batch up front.
DEFAULT_MAX_BATCH_SIZE = 1024


@dataclass
class BatchSearch:
    start: int
    limit: int  # the search never probes past it (harness/sweep.py, BatchSearchPlan)
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

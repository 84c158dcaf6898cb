"""Plain records: one per timed batch (`BatchSample`) and one per point (`PointResult`).

Metrics are computed from these by `harness.metrics`; writers turn both into CSV rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from harness.sweep import SweepPoint

STATUSES = ("ok", "oom", "skipped", "error")


@dataclass(frozen=True)
class RunContext:
    """What every row of a backend entry shares: which engine, model and hardware produced it."""

    benchmark_name: str
    backend: str
    model: str
    dtype: str
    hardware: str
    num_devices: int
    tp_size: int


@dataclass(frozen=True)
class BatchSample:
    batch_index: int
    latency_ms: float
    ttft_ms: float
    tpot_ms: Optional[float]
    min_output_tokens: int
    request_ttfts_ms: Optional[Tuple[float, ...]] = None


@dataclass
class PointResult:
    context: RunContext
    point: SweepPoint
    status: str
    error: str = ""
    samples: List[BatchSample] = field(default_factory=list)
    num_warmup_batches: int = 0
    peak_memory_bytes: Optional[int] = None
    load_time_s: Optional[float] = None
    estimated_memory_bytes: Optional[int] = None
    engine_stats: Dict[str, object] = field(default_factory=dict)  # the engine's own figures, e.g. KV capacity
    token_ids: Optional[Tuple[Tuple[int, ...], ...]] = field(default=None, repr=False)  # first timed batch
    tokens_identical_share: Optional[float] = None  # vs the sweep's first backend entry, same point

    def __post_init__(self):
        assert self.status in STATUSES, self.status

    @property
    def key(self) -> Tuple[str, int, int, int]:
        """Identity of the row in results.csv, used by `--resume`."""
        return point_key(self.context.backend, self.point)


def point_key(backend: str, point: SweepPoint) -> Tuple[str, int, int, int]:
    return (backend, point.batch_size, point.input_length, point.output_length)

"""Plain records: one per timed batch (`BatchSample`) and one per point (`PointResult`), frozen once built.

A point's data flows one way (docs/architecture.md): the runner builds its `PointResult` of what was measured;
`harness.measure.metrics` derives its figures; the annotators (`harness.measure.annotations`) each derive their own
small record from it; `harness.measure.sink` composes the one row. Nothing edits a record after it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from harness.measure.gpu_validity import GpuValidity
from harness.plan.points import SweepPoint
from harness.scenarios.accuracy import TaskScore
from harness.scenarios.batch import LogitsProbe, SpecCounts
from harness.scenarios.stream import StreamTiming

STATUSES = ("ok", "oom", "skipped", "error")


@dataclass(frozen=True)
class RunContext:
    """What every row of a backend entry shares: which engine, model and hardware produced it."""

    benchmark_name: str
    backend: str
    model: str
    dtype: str
    hardware: str
    num_devices: int  # on every node together
    tp_size: int
    nodes: int = 1
    pp_size: int = 1

    def key(self, point: SweepPoint) -> "PointKey":
        """The identity of this entry's row at `point` (`point_key`)."""
        return point_key(self.model, self.backend, point)


@dataclass(frozen=True)
class BatchSample:
    """One timed batch: its batch-level times and, per sequence, tokens in and out and the engine's stamps."""

    batch_index: int
    latency_ms: float
    ttft_ms: float
    tpot_ms: Optional[float]
    input_tokens: Tuple[int, ...]
    output_tokens: Tuple[int, ...]
    request_ttfts_ms: Optional[Tuple[float, ...]] = None
    request_latencies_ms: Optional[Tuple[float, ...]] = None
    spec: Optional[SpecCounts] = None  # an entry that speculates
    energy_j: Optional[float] = None  # the entry's GPUs over the batch (harness/measure/energy.py), where NVML has it
    cached_tokens: Optional[Tuple[int, ...]] = None  # per sequence, served from the prefix cache, where the engine says

    @property
    def min_output_tokens(self) -> int:
        return min(self.output_tokens)

    def request_tpots_ms(self) -> Tuple[float, ...]:
        """Per sequence: (its last token - its first) / (its tokens - 1); sequences of one token have none."""
        if self.request_ttfts_ms is None or self.request_latencies_ms is None:
            return ()
        return tuple((last - first) / (n - 1) for first, last, n in
                     zip(self.request_ttfts_ms, self.request_latencies_ms, self.output_tokens) if n > 1)


@dataclass(frozen=True)
class SLO:
    """The latency targets a stream point's requests are judged by (config `stream.slo`)."""

    ttft_ms: float
    tpot_ms: float
    percentile: float


@dataclass(frozen=True)
class PointResult:
    """What one point measured, as the runner saw it: its timings, memory, the engine's own figures and the
    inputs the annotators compare (token ids, logits probe). What is said of it against other entries (the token
    cross-check, the quantization price, the speculative speed-up, the roofline) is not here: see annotations.py."""

    context: RunContext
    point: SweepPoint
    status: str
    error: str = ""
    samples: Tuple[BatchSample, ...] = ()  # scenario batch: the timed batches
    stream: Optional[StreamTiming] = field(default=None, repr=False)  # scenario stream: the timed requests
    slo: Optional[SLO] = None  # scenario stream
    num_warmup_batches: int = 0  # or warm-up requests, in a stream
    peak_memory_bytes: Optional[int] = None
    peak_host_memory_bytes: Optional[int] = None  # where the engine keeps weights on the host (offload)
    load_time_s: Optional[float] = None
    estimated_memory_bytes: Optional[int] = None
    # The same counter as peak_memory_bytes before the engine loaded (the host's RSS holds the interpreter and
    # libraries): the peak minus it is what the engine and the point added, what the estimate predicts.
    memory_before_load_bytes: Optional[int] = None
    engine_stats: Dict[str, object] = field(default_factory=dict)  # the engine's own figures, e.g. KV capacity
    token_ids: Optional[Tuple[Tuple[int, ...], ...]] = field(default=None, repr=False)  # first timed batch
    # request_rates: auto and batch_sizes: auto: "probe" for each rate or batch the search measured, "result"
    # for the search's own row
    search: str = ""
    search_probes: str = ""  # the result row: every probe and how it went
    max_rate_within_slo: Optional[float] = None  # a rate search's result: highest sustained rate (None: none met)
    max_batch_size_found: Optional[int] = None  # a batch search's result: largest batch that ran (None: none)
    # a stream point with a rate (harness/scenarios/saturation.py): whether it saturated the engine, and why; None
    # where it was not judged
    saturated: Optional[bool] = None
    saturation_reason: str = ""
    spec_method: str = ""  # the entry's speculative.method, "" without speculation
    spec_tokens: Optional[int] = None  # its num_speculative_tokens
    converged: Optional[bool] = None  # num_batches: auto: the mean latency within stop.target_ci_pct
    quantization: str = "none"  # the entry's weights as loaded (model.quantization)
    grid_options: str = ""  # the values the entry's `grid` combination varies, `k=v;k=v` (harness/config/grid.py)
    probe: Optional[LogitsProbe] = field(default=None, repr=False)  # its model on the point's first inputs
    perplexity: Optional[float] = None  # the entry's model on quality.text (once per entry)
    # accuracy.tasks, every task's examples together, answered by the entry's engine (once per entry, after loading)
    accuracy: Optional[TaskScore] = None
    phase_s: Dict[str, float] = field(default_factory=dict, repr=False)  # warmup_s, timed_s: the time budget
    # profile: true: one more batch of the point's shape, untimed, under the engine's profiler: its Chrome trace as
    # gzipped JSON, written by the results folder (writers.py: profile_trace_file); None where none was taken
    profile_trace: Optional[bytes] = field(default=None, repr=False)
    # The GPUs over the timed phase (harness/measure/gpu_validity.py): clocks, slowdowns, other processes, and the
    # verdict; None where NVML cannot read them (a CPU) or the point was not timed
    gpu_validity: Optional[GpuValidity] = None

    def __post_init__(self):
        assert self.status in STATUSES, self.status

    @property
    def key(self) -> PointKey:
        """Identity of the row in results.csv, used by `--resume`."""
        return self.context.key(self.point)

    @property
    def measured(self) -> bool:
        return bool(self.samples) or self.stream is not None


PointKey = Tuple[str, str, str, str, Optional[int], int, int, Optional[float], Optional[int]]


def point_key(model: str, backend: str, point: SweepPoint) -> PointKey:
    """`model` is the model's label (the `model` column) and `backend` the entry's: a sweep over `models` runs
    every entry once per model."""
    return (model, backend, point.scenario, point.workload, point.batch_size, point.input_length, point.output_length,
            point.request_rate, point.max_concurrency)

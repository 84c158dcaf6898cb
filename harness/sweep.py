"""Sweep plan: every (backend entry, point) to run, with its memory estimate and whether it fits.

The plan is computed before any model is loaded; `--dry-run` prints it and stops.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import List, Optional

from harness.batchsearch import DEFAULT_MAX_BATCH_SIZE
from harness.config import SweepConfig, entry_key
from harness.hardware import cuda_device_count, planned_machine
from harness.memory import GiB, MemoryEstimate, available_bytes, usable_cpus
from harness.models import ModelSpec
from harness.registry import Registry


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
    runner searches for the largest batch that runs (harness/batchsearch.py) and reports each batch it
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
        elif self.rate_search:
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

    @property
    def max_tokens(self) -> int:
        return self.max_input_length + self.max_output_length


def sweep_shape(points: List["PlannedPoint"], workload) -> SweepShape:
    """For a stream, the batch an engine may be handed at once is bounded by the cap, if any (else 0: the
    engine's own limit)."""
    return SweepShape(max(pp.max_batch for pp in points),
                      max(workload.longest_input(pp.point) for pp in points),
                      max(pp.point.output_length for pp in points), points[0].point.scenario)


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


@dataclass
class EntryPlan:
    """One backend entry of the sweep, for one model: its options, where it runs, its points in run order, and the
    workload (workloads/) every entry of that model shares, which makes each point's batches."""

    options: object
    backend_cls: type
    placement: object
    budget_bytes: int
    points: List[PlannedPoint]
    workload: object
    model: ModelSpec
    unavailable: Optional[str] = None  # what this machine lacks to run the entry at all

    @property
    def shape(self) -> SweepShape:
        return sweep_shape(self.points, self.workload)

    @property
    def label(self) -> str:
        return self.options.entry_label


def sweep_points(config: SweepConfig, workload) -> List[SweepPoint]:
    lengths = list(itertools.product(workload.input_lengths(), config.output_lengths))
    if config.batch_sizes == "auto":
        points = [SweepPoint(i, o, None, workload.name, batch_search=True) for i, o in lengths]
    elif config.scenario == "batch":
        points = [SweepPoint(i, o, b, workload.name) for (i, o), b in itertools.product(lengths, config.batch_sizes)]
    else:
        s = config.stream
        rates = [math.inf] if s.arrival == "burst" else [None] if s.request_rates == "auto" else s.request_rates
        points = [SweepPoint(i, o, None, workload.name, r, c)
                  for (i, o), r, c in itertools.product(lengths, rates, s.max_concurrency)]
    return sorted(points, key=lambda p: p.sort_key)


def concurrency(point: SweepPoint) -> int:
    """Sequences an engine may hold at once for this point: the batch (1 for a batch search, the least it
    tries), or a stream's cap (0: no cap)."""
    if point.scenario == "batch":
        return point.batch_size or 1
    return point.max_concurrency or 0


def plan_sweep(config: SweepConfig, model: ModelSpec, backends: Registry, workload) -> List[EntryPlan]:
    """`backends` is backends.REGISTRY and `workload` the sweep's built workload, handed down by the CLI."""
    plans = []
    for i, options in enumerate(config.backends):
        cls = backends.get(options.name, f"{entry_key(options, i)}.name")
        placement = cls.resolve_placement(options)
        missing = cls.unsupported(options, config.scenario, model) or missing_devices(placement)
        free = 0 if missing else free_bytes(placement)
        budget = int(free * config.memory_fraction)
        points = []
        for p in sweep_points(config, workload):
            estimate = cls.estimate_memory(options, model, estimate_batch(cls, options, p), workload.longest_input(p),
                                           p.output_length)
            reason = missing or cls.point_unsupported(options, p)
            over_memory = None if reason else memory_skip(estimate, budget, placement.device, config)
            search = None
            if p.batch_search and not (reason or over_memory):
                search = plan_batch_search(cls, options, model, p, workload.longest_input(p), budget,
                                           placement.device, config)
            points.append(PlannedPoint(p, estimate, reason or over_memory, over_memory is not None, search))
        plans.append(EntryPlan(options, cls, placement, budget, points, workload, model, missing))
    # Entries without speculation first: they are the baselines speculative entries are compared with as their
    # points finish (speed-up, tokens).
    return sorted(plans, key=lambda plan: plan.options.speculative is not None)


def plan_batch_search(cls, options, model: ModelSpec, point: SweepPoint, longest_input: int, budget: int,
                      device: str, config: SweepConfig) -> BatchSearchPlan:
    from harness.planner import largest_fitting  # it plans from this module's points

    cap = config.max_batch_size or DEFAULT_MAX_BATCH_SIZE
    estimated = largest_fitting(lambda n: cls.estimate_memory(options, model, n, longest_input, point.output_length)
                                .total_bytes <= budget, limit=cap)
    if device == "cuda" or estimated == cap:
        return BatchSearchPlan(estimated, cap, f"max_batch_size {cap}")
    return BatchSearchPlan(estimated, estimated, f"a larger batch's memory estimate is over memory_fraction "
                           f"({config.memory_fraction}) of free host memory")


def estimate_batch(cls, options, point: SweepPoint) -> int:
    """The batch a point's memory estimate is for. A stream's engine holds at most its cap, or its own
    batch limit (`stream_batch_limit`), or, with neither, one sequence per estimate (engines that
    preallocate, like vLLM, estimate their whole cache anyway). A batch search's is for one sequence:
    each batch it tries is held against its own estimate."""
    if point.scenario == "batch":
        return point.batch_size or 1
    limits = [n for n in (point.max_concurrency, cls.stream_batch_limit(options)) if n]
    return min(limits) if limits else 1


def missing_devices(placement) -> Optional[str]:
    """A YAML is valid on any machine: what this one (or the planned one) lacks turns into skipped points, not an
    error."""
    if placement.device == "cuda":
        present, unit = cuda_device_count(), "CUDA device(s)"
    else:
        present, unit = usable_cpus(), "CPU cores"
    if placement.num_devices <= present:
        return None
    machine = planned_machine()
    where = f"{machine.num_gpus} x {machine.gpu} has" if machine and placement.device == "cuda" else "this machine has"
    return f"needs {placement.num_devices} {unit}, {where} {present}"


def free_bytes(placement) -> int:
    """Free memory on the entry's devices: this machine's now, or all of the planned machine's GPUs' memory."""
    machine = planned_machine()
    if machine is not None and placement.device == "cuda":
        return machine.memory_bytes_per_gpu * placement.num_devices
    return available_bytes(placement.device, placement.num_devices)


def memory_skip(estimate: MemoryEstimate, budget: int, device: str, config: SweepConfig) -> Optional[str]:
    if estimate.total_bytes <= budget:
        return None
    return (
        f"needs an estimated {estimate.describe()}; {budget / GiB:.1f} GiB allowed on {device} "
        f"(memory_fraction {config.memory_fraction} of free memory)"
    )

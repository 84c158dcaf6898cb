"""Sweep plan: every (backend entry, point) to run, with its memory estimate and whether it fits.

The plan is computed before any model is loaded; `--dry-run` prints it and stops.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional

from harness.config import SweepConfig
from harness.memory import GiB, MemoryEstimate, available_bytes, usable_cpus
from harness.models import ModelSpec
from harness.registry import Registry


@dataclass(frozen=True, order=True)
class SweepPoint:
    """One shape of the sweep. Ordered by lengths, then batch size, so batch sizes grow within a length pair.

    `workload` names what the prompts are (`random`, or a prompt file with its template). For a prompt
    file, `input_length` is the mean prompt length of the prompts the sweep draws from, and
    `output_length` the output budget (forced, or a cap when EOS may stop a sequence).
    """

    input_length: int
    output_length: int
    batch_size: int
    workload: str = "random"


@dataclass(frozen=True)
class SweepShape:
    """The largest shapes of a sweep, for engines that size buffers up front (vLLM, DeepSpeed)."""

    max_batch_size: int
    max_input_length: int
    max_output_length: int

    @property
    def max_tokens(self) -> int:
        return self.max_input_length + self.max_output_length


def sweep_shape(points: List["PlannedPoint"], workload) -> SweepShape:
    return SweepShape(max(pp.point.batch_size for pp in points),
                      max(workload.longest_input(pp.point) for pp in points),
                      max(pp.point.output_length for pp in points))


@dataclass(frozen=True)
class PlannedPoint:
    point: SweepPoint
    estimate: MemoryEstimate
    skip_reason: Optional[str] = None


@dataclass
class EntryPlan:
    """One backend entry of the sweep: its options, where it runs, its points in run order, and the
    workload (workloads/) every entry of the sweep shares, which makes each point's batches."""

    options: object
    backend_cls: type
    placement: object
    budget_bytes: int
    points: List[PlannedPoint]
    workload: object
    unavailable: Optional[str] = None  # what this machine lacks to run the entry at all

    @property
    def shape(self) -> SweepShape:
        return sweep_shape(self.points, self.workload)

    @property
    def label(self) -> str:
        return self.options.entry_label


def sweep_points(config: SweepConfig, workload) -> List[SweepPoint]:
    shapes = itertools.product(workload.input_lengths(), config.output_lengths, config.batch_sizes)
    return sorted(SweepPoint(i, o, b, workload.name) for i, o, b in shapes)


def plan_sweep(config: SweepConfig, model: ModelSpec, backends: Registry, workload) -> List[EntryPlan]:
    """`backends` is backends.REGISTRY and `workload` the sweep's built workload, handed down by the CLI."""
    plans = []
    for i, options in enumerate(config.backends):
        cls = backends.get(options.name, f"backends[{i}].name")
        placement = cls.resolve_placement(options)
        missing = _missing_devices(placement)
        free = 0 if missing else available_bytes(placement.device, placement.num_devices)
        budget = int(free * config.memory_fraction)
        points = []
        for p in sweep_points(config, workload):
            estimate = cls.estimate_memory(options, model, p.batch_size, workload.longest_input(p), p.output_length)
            reason = missing or _memory_skip(estimate, budget, placement.device, config)
            points.append(PlannedPoint(p, estimate, reason))
        plans.append(EntryPlan(options, cls, placement, budget, points, workload, missing))
    return plans


def _missing_devices(placement) -> Optional[str]:
    """A YAML is valid on any machine: what this one lacks turns into skipped points, not an error."""
    if placement.device == "cuda":
        import torch

        present, unit = torch.cuda.device_count(), "CUDA device(s)"
    else:
        present, unit = usable_cpus(), "CPU cores"
    if placement.num_devices <= present:
        return None
    return f"needs {placement.num_devices} {unit}, this machine has {present}"


def _memory_skip(estimate: MemoryEstimate, budget: int, device: str, config: SweepConfig) -> Optional[str]:
    if estimate.total_bytes <= budget:
        return None
    return (
        f"needs an estimated {estimate.describe()}; {budget / GiB:.1f} GiB allowed on {device} "
        f"(memory_fraction {config.memory_fraction} of free memory)"
    )

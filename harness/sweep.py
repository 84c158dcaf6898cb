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


@dataclass(frozen=True, order=True)
class SweepPoint:
    """One shape of the sweep. Ordered by lengths, then batch size, so batch sizes grow within a length pair."""

    input_length: int
    output_length: int
    batch_size: int


@dataclass(frozen=True)
class SweepShape:
    """The largest shapes of a sweep, for engines that size buffers up front (vLLM, DeepSpeed)."""

    max_batch_size: int
    max_input_length: int
    max_output_length: int

    @property
    def max_tokens(self) -> int:
        return self.max_input_length + self.max_output_length


def sweep_shape(config: SweepConfig) -> SweepShape:
    return SweepShape(max(config.batch_sizes), max(config.input_lengths), max(config.output_lengths))


@dataclass(frozen=True)
class PlannedPoint:
    point: SweepPoint
    estimate: MemoryEstimate
    skip_reason: Optional[str] = None


@dataclass
class EntryPlan:
    """One backend entry of the sweep: its options, where it runs, and its points in run order."""

    options: object
    backend_cls: type
    placement: object
    budget_bytes: int
    points: List[PlannedPoint]
    unavailable: Optional[str] = None  # what this machine lacks to run the entry at all

    @property
    def label(self) -> str:
        return self.options.entry_label


def sweep_points(config: SweepConfig) -> List[SweepPoint]:
    shapes = itertools.product(config.input_lengths, config.output_lengths, config.batch_sizes)
    return sorted(SweepPoint(i, o, b) for i, o, b in shapes)


def plan_sweep(config: SweepConfig, model: ModelSpec) -> List[EntryPlan]:
    from backends import backend_class

    plans = []
    for options in config.backends:
        cls = backend_class(options.name)
        placement = cls.resolve_placement(options)
        missing = _missing_devices(placement)
        free = 0 if missing else available_bytes(placement.device, placement.num_devices)
        budget = int(free * config.memory_fraction)
        points = []
        for p in sweep_points(config):
            estimate = cls.estimate_memory(options, model, p.batch_size, p.input_length, p.output_length)
            reason = missing or _memory_skip(estimate, budget, placement.device, config)
            points.append(PlannedPoint(p, estimate, reason))
        plans.append(EntryPlan(options, cls, placement, budget, points, missing))
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

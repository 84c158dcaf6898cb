"""One backend entry of a sweep, for one model, as planned: what runs, where, on which points."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List, Optional, Tuple

from harness.config.engine import BackendOptions
from harness.model.spec import ModelSpec
from harness.plan.engine import EngineClass, Placement, PointWorkload
from harness.plan.points import PlannedPoint, SweepShape


def sweep_shape(points: List[PlannedPoint], workload: PointWorkload) -> SweepShape:
    """For a stream, the batch an engine may be handed at once is bounded by the cap, if any (else 0: the
    engine's own limit)."""
    return SweepShape(max(pp.max_batch for pp in points),
                      max(workload.longest_input(pp.point) for pp in points),
                      max(pp.point.output_length for pp in points), points[0].point.scenario)


@dataclass
class EntryPlan:
    """One backend entry of the sweep, for one model: its options, where it runs, its points in run order, and the
    workload (workloads/) every entry of that model shares, which makes each point's batches."""

    options: BackendOptions
    backend_cls: EngineClass
    placement: Placement
    budget_bytes: int
    points: List[PlannedPoint]
    workload: PointWorkload
    model: ModelSpec
    unavailable: Optional[str] = None  # what this machine lacks to run the entry at all
    # A sweep that quantizes holds each quantized entry against the unquantized one (harness/measure/quality.py): then
    # every entry probes its model on each point's first inputs, untimed.
    probe_logits: bool = False
    # quality.text's token ids: the entry scores its model's perplexity on them once, after loading (None: not asked).
    perplexity_ids: Optional[Tuple[int, ...]] = None
    perplexity_window: int = 0

    @property
    def shape(self) -> SweepShape:
        return dataclasses.replace(sweep_shape(self.points, self.workload), probe_logits=self.probe_logits)

    @property
    def label(self) -> str:
        return self.options.entry_label

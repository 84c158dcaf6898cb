"""One backend entry of a sweep, for one model, as planned: what runs, where, on which points."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List, Optional, Tuple

from harness.config.engine import BackendOptions
from harness.model.spec import ModelSpec
from harness.plan.engine import EngineClass, Placement, PointWorkload
from harness.plan.points import PlannedPoint, SweepShape
from harness.scenarios.accuracy import AccuracyTask, LmEvalTasks


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
    # accuracy.tasks, read for this entry's model: answered once after loading, through the loaded engine.
    accuracy_tasks: Tuple[AccuracyTask, ...] = ()
    accuracy_batch_size: int = 1
    lm_eval: Optional[LmEvalTasks] = None  # accuracy.lm_eval_tasks: scored by lm-eval through the entry's server

    @property
    def shape(self) -> SweepShape:
        """The sweep's points, widened to hold the accuracy tasks' batches too: the engine is built for both."""
        shape = dataclasses.replace(sweep_shape(self.points, self.workload), probe_logits=self.probe_logits)
        if not self.accuracy_tasks:
            return shape
        batch = shape.max_batch_size and max(shape.max_batch_size, self.accuracy_batch_size)  # 0: uncapped stays
        return dataclasses.replace(shape, max_batch_size=batch,
                                   max_input_length=max([shape.max_input_length] + [t.longest_prompt for t in
                                                                                    self.accuracy_tasks]),
                                   max_output_length=max([shape.max_output_length] + [t.longest_answer for t in
                                                                                      self.accuracy_tasks]))

    @property
    def label(self) -> str:
        return self.options.entry_label

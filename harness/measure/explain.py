"""Each point's ROOFLINE_COLUMNS as it finishes (harness/model/roofline.py), against its entry's peaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional

from harness.measure.records import PointResult
from harness.model.hardware import Peaks
from harness.model.roofline import ROOFLINE_COLUMNS, Measured, Shape, explain


@dataclass(frozen=True)
class RooflineFigures:
    """What the roofline says of one point: ROOFLINE_COLUMNS by name (empty for a point that did not run)."""

    values: Mapping[str, Optional[float]] = field(default_factory=dict)


def _known(figures: Dict[str, Optional[float]], name: str) -> float:
    """A figure every point with timed batches has (metrics.summarize)."""
    value = figures.get(name)
    assert value is not None, f"{name} of a point with timed batches"
    return float(value)


class PointExplainer:
    """Per entry label: `shapes` the model as the entry loads it (quantized or not), `peaks` (None: unknown, the
    roofline figures stay empty), `devices` the multiplier of those peaks (a GPU entry's device count; 1 for a CPU,
    whose probe measured every core)."""

    def __init__(self, shapes: Dict[str, Shape], peaks: Dict[str, Optional[Peaks]], devices: Dict[str, int],
                 cost_per_hour: Optional[float]):
        self.shapes, self.peaks, self.devices, self.cost_per_hour = shapes, peaks, devices, cost_per_hour

    def annotate(self, result: PointResult, figures: Dict[str, Optional[float]]) -> RooflineFigures:
        if result.status != "ok":
            return RooflineFigures()
        label = result.context.backend
        measured = None
        # Speculation emits several tokens per step: decode bytes per token would not be per step (empty).
        if result.samples and not result.spec_method:
            samples, batch_size = result.samples, result.point.batch_size
            assert batch_size is not None  # timed batches are a batch point's, each of its size
            measured = Measured(
                batch_size=batch_size, prompt_lengths=[s.input_tokens for s in samples],
                output_tokens_mean=_known(figures, "output_tokens_mean"),
                output_tokens_max=max(max(s.output_tokens) for s in samples),
                latency_ms=_known(figures, "latency_ms_mean"), ttft_ms=_known(figures, "ttft_ms_mean"),
                tpot_ms=figures.get("tpot_ms_mean"))
        explained = explain(self.shapes[label], measured, self.peaks.get(label), self.devices.get(label, 1),
                            figures.get("throughput_tokens_per_s"), self.cost_per_hour)
        return RooflineFigures({k: v for k, v in explained.items() if k in ROOFLINE_COLUMNS})

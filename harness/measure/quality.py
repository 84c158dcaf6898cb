"""What quantization costs in accuracy (docs/measurement.md, "Quantization"): each quantized entry's model against the
same engine's unquantized entry, on the same inputs (each point's first timed batch, or its stream's first requests).

Both entries hand over a `LogitsProbe` of those inputs (an untimed forward after the point's timing). Per point:
`logits_rel_error` = ||L_q - L|| / ||L|| over the last prompt position's logits of every probed sequence, and
`top1_agreement` = the share of prompt positions where both models' argmax agree. The unquantized entry's own rows
read 0 and 1. References run first (`plan_sweep` orders the entries so) and are kept in memory only: a quantized entry
added on `--resume` to a folder whose reference ran earlier gets no price.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from harness.measure.records import PointResult, point_key
from harness.plan.points import EntryPlan
from harness.scenarios.batch import LogitsProbe


def _settings(options) -> dict:
    return {k: v for k, v in dataclasses.asdict(options).items() if k not in ("label", "quantization")}


class QualityCheck:
    """Each quantized entry is held against the entry with the same engine and options but unquantized weights."""

    def __init__(self, plans: Sequence[EntryPlan]):
        plain = [p for p in plans if p.options.quantization == "none"]
        self.references: Dict[str, str] = {}
        for p in plans:
            if p.options.quantization != "none":
                match = next((r for r in plain if _settings(r.options) == _settings(p.options)), None)
                if match is not None:
                    self.references[p.label] = match.label
        self.probes: Dict[Tuple, LogitsProbe] = {}
        self.perplexities: Dict[Tuple[str, str], float] = {}  # (model, reference entry) -> its perplexity

    @property
    def active(self) -> bool:
        """Whether any entry is compared: only then do entries probe their model."""
        return bool(self.references)

    def describe(self) -> str:
        if not self.references:
            return "off: no quantized entry with an unquantized entry of the same engine and options"
        return "logits compared on each point's first inputs: " + ", ".join(
            f"{a} with {b}" for a, b in sorted(self.references.items()))

    def annotate(self, result: PointResult) -> None:
        label, probe = result.context.backend, result.probe
        reference = self.references.get(label)
        result.quality_reference = reference or ""
        self._perplexity_delta(result, label, reference)
        if probe is None:
            return
        if label in self.references.values():
            self.probes[point_key(result.context.model, label, result.point)] = probe
            result.logits_rel_error, result.top1_agreement = 0.0, 1.0
        if reference is not None:
            held = self.probes.get(point_key(result.context.model, reference, result.point))
            if held is not None:
                result.logits_rel_error, result.top1_agreement = compare(held, probe)


    def _perplexity_delta(self, result: PointResult, label: str, reference: Optional[str]) -> None:
        if result.perplexity is None:
            return
        model = result.context.model
        if label in self.references.values():
            self.perplexities[(model, label)] = result.perplexity
            result.perplexity_delta = 0.0
        if reference is not None and (model, reference) in self.perplexities:
            result.perplexity_delta = result.perplexity - self.perplexities[(model, reference)]


def compare(reference: LogitsProbe, other: LogitsProbe) -> Tuple[Optional[float], Optional[float]]:
    """(relative L2 error of the last-position logits, share of positions with the same argmax); None where the
    probes do not cover the same inputs."""
    a, b = np.asarray(reference.last_logits, dtype=np.float64), np.asarray(other.last_logits, dtype=np.float64)
    if a.shape != b.shape or [len(r) for r in reference.top1] != [len(r) for r in other.top1]:
        return None, None
    norm = float(np.linalg.norm(a))
    error = float(np.linalg.norm(b - a)) / norm if norm else None
    positions = sum(len(r) for r in reference.top1)
    same = sum(x == y for r, o in zip(reference.top1, other.top1) for x, y in zip(r, o))
    return error, (same / positions if positions else None)

"""What is said of a finished point beyond its own timings, each by its own annotator from the point's record and
figures (`metrics.point_figures`, computed once): the token cross-check against its reference entry, the accuracy
price of quantized weights against the unquantized entry, the speed-up over its speculative baseline, and the
roofline explanation against its entry's peaks. Each answers with a small frozen record; none touches the point's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Optional

from harness.measure.crosscheck import TokenAgreement, TokenCrossCheck
from harness.measure.explain import PointExplainer, RooflineFigures
from harness.measure.quality import QualityCheck, QualityPrice
from harness.measure.records import PointResult
from harness.measure.spec_baseline import BaselineComparison, SpeedUp


@dataclass(frozen=True)
class Annotations:
    """Everything the annotators said of one point; empty for a point no annotator looked at."""

    tokens: TokenAgreement = field(default_factory=TokenAgreement)
    speedup: SpeedUp = field(default_factory=SpeedUp)
    quality: QualityPrice = field(default_factory=QualityPrice)
    roofline: RooflineFigures = field(default_factory=RooflineFigures)

    def columns(self) -> Dict[str, object]:
        """Their results.csv cells: each record's fields are named as its columns."""
        return {**dataclasses.asdict(self.tokens), **dataclasses.asdict(self.speedup),
                **dataclasses.asdict(self.quality), **self.roofline.values}


@dataclass
class PointAnnotations:
    """One model's annotators; the baseline comparison is the sweep's, shared by its models. Each keeps what later
    points are compared with (a reference's tokens and probes, a baseline's TPOT)."""

    crosscheck: TokenCrossCheck
    comparison: BaselineComparison
    explainer: PointExplainer
    quality: QualityCheck

    def annotate(self, result: PointResult, figures: Dict[str, Optional[float]]) -> Annotations:
        return Annotations(self.crosscheck.annotate(result), self.comparison.annotate(result, figures.get("tpot_ms_mean")),
                           self.quality.annotate(result), self.explainer.annotate(result, figures))

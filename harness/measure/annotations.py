"""What is said of a finished point beyond its own timings, filled in before its row is built (app/session.py):
the token cross-check against its reference entry, the accuracy price of quantized weights against the unquantized
entry, the speed-up over its speculative baseline, and the roofline explanation against its entry's peaks. Each reads the point's figures (`metrics.point_figures`), computed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from harness.measure.crosscheck import TokenCrossCheck
from harness.measure.explain import PointExplainer
from harness.measure.quality import QualityCheck
from harness.measure.records import PointResult
from harness.measure.spec_baseline import BaselineComparison


@dataclass
class PointAnnotations:
    """One model's annotators; the baseline comparison is the sweep's, shared by its models."""

    crosscheck: TokenCrossCheck
    comparison: BaselineComparison
    explainer: PointExplainer
    quality: QualityCheck

    def annotate(self, result: PointResult, figures: Dict[str, Optional[float]]) -> None:
        self.crosscheck.annotate(result)
        self.quality.annotate(result)
        self.comparison.annotate(result, figures.get("tpot_ms_mean"))
        self.explainer.annotate(result, figures)

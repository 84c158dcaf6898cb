"""Speculative entries against their baselines (the same engine without speculation): `speedup_vs_baseline` per
point, said as points finish (docs/measurement.md, "Speculative decoding").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from harness.measure.records import PointResult, point_key


@dataclass(frozen=True)
class SpeedUp:
    """What the comparison says of one point of a speculative entry (empty for any other)."""

    spec_baseline: str = ""  # the entry without speculation it is compared with
    speedup_vs_baseline: Optional[float] = None  # the baseline's mean TPOT at this point / this entry's


class BaselineComparison:
    """Says `spec_baseline` and `speedup_vs_baseline` (the baseline's mean TPOT at the same point / the
    speculative entry's) as points finish. Baselines run first (`plan_sweep`'s order); a resumed sweep finds the
    baseline TPOTs of finished points in results.csv (`previous_rows`)."""

    def __init__(self, baselines: Dict[str, Optional[str]], previous_rows: Sequence[Dict[str, str]]):
        from harness.measure.writers import row_key

        self.baselines = baselines
        self.tpot_ms: Dict[tuple, float] = {}
        wanted = set(baselines.values())
        for row in previous_rows:
            if row["backend"] in wanted and row["status"] == "ok" and row.get("tpot_ms_mean"):
                self.tpot_ms[row_key(row)] = float(row["tpot_ms_mean"])

    def annotate(self, result: PointResult, tpot_ms: Optional[float]) -> SpeedUp:
        """Keep a baseline's TPOT; a speculative entry's point gets its speed-up over its baseline's."""
        label = result.context.backend
        if result.status == "ok" and tpot_ms and label in self.baselines.values():
            self.tpot_ms[result.key] = tpot_ms
        baseline = self.baselines.get(label)
        if baseline is None:
            return SpeedUp()
        base_ms = self.tpot_ms.get(point_key(result.context.model, baseline, result.point))
        if result.status != "ok" or not tpot_ms or not base_ms:
            return SpeedUp(baseline)
        return SpeedUp(baseline, base_ms / tpot_ms)

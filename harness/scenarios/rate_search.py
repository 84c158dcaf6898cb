"""`stream.request_rates: auto`: the highest request rate an engine sustains within the SLO.

Doubling from `search.start_rate` until a rate fails the SLO (or halving until one meets it),
then bisecting between the highest sustained and the lowest failed rate until they are within
`search.precision` of each other. Pure bookkeeping: the runner measures each probe as an
ordinary stream point and reports whether it met the SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

# Halving stops this far below the start rate: an engine that cannot sustain it has no useful answer.
MAX_HALVINGS = 10


@dataclass
class RateSearch:
    start_rate: float
    precision: float
    max_probes: int
    sustained: Optional[float] = None  # the highest rate that met the SLO so far
    failed: Optional[float] = None  # the lowest rate that did not
    probes: List[Tuple[float, bool]] = field(default_factory=list)
    saturated: List[float] = field(default_factory=list)  # probes missed for saturation (stream.stop_at_saturation)

    def next_rate(self) -> Optional[float]:
        """The rate to probe next, or None when the search is done."""
        if len(self.probes) >= self.max_probes:
            return None
        if self.failed is None:
            return self.start_rate if self.sustained is None else self.sustained * 2
        if self.sustained is None:
            rate = self.failed / 2
            return rate if rate >= self.start_rate / 2**MAX_HALVINGS else None
        if self.failed <= self.sustained * (1 + self.precision):
            return None
        return round((self.sustained + self.failed) / 2, 6)

    def record(self, rate: float, met: bool, saturated: bool = False) -> None:
        """`saturated`: the probe saturated the engine, and counts as missed whatever its SLO attainment."""
        met = met and not saturated
        if saturated:
            self.saturated.append(rate)
        self.probes.append((rate, met))
        if met:
            self.sustained = max(rate, self.sustained or rate)
        else:
            self.failed = min(rate, self.failed or rate)

    @property
    def converged(self) -> bool:
        """Both bounds found and within the precision (not cut short by max_probes)."""
        return (self.sustained is not None and self.failed is not None
                and self.failed <= self.sustained * (1 + self.precision))

    def describe(self) -> str:
        """`probes: 4/s met, 8/s missed, 6/s met, ...`, and why the search stopped short when it did."""
        probes = ", ".join(f"{rate:g}/s {'met' if met else 'saturated' if rate in self.saturated else 'missed'}"
                           for rate, met in self.probes)
        if self.converged:
            return f"probes: {probes}"
        if self.sustained is None:
            why = "no rate probed met the SLO"
        elif self.failed is None:
            why = f"every rate probed met the SLO; raise search.max_probes ({self.max_probes}) or start_rate"
        else:
            why = f"search.max_probes ({self.max_probes}) reached before the bounds were within the precision"
        return f"probes: {probes} (not converged: {why})"

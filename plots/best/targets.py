"""What a point must meet to count (docs/guides/best.md): latency at a percentile, a per-user speed floor, a cost
ceiling and an accuracy-drop ceiling, each optional. Stated once: the sweep's `target` section, else a stream's own
`stream.slo`; `python -m plots --best` flags override either."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from plots.errors import PlotError

PERCENTILES = (50, 90, 99)  # the latency percentiles results.csv holds


@dataclass(frozen=True)
class Targets:
    """Each made from checked values: a manifest's section (`from_section`), a stream's validated slo (`from_slo`) or
    --best's flags (checked by plots/__main__.py)."""

    ttft_ms: Optional[float] = None  # time to first token at `percentile`, at most
    tpot_ms: Optional[float] = None  # time per output token at `percentile`, at most
    percentile: int = 99
    min_user_tokens_per_s: Optional[float] = None  # output tokens/s one user sees, at least
    max_cost_per_m_tokens: Optional[float] = None  # cost per million output tokens, at most
    max_accuracy_drop: Optional[float] = None  # accuracy_delta at least minus this (where accuracy was measured)

    @property
    def stated(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "percentile")

    def describe(self) -> str:
        """`TTFT p99 <= 2,000 ms, TPOT p99 <= 50 ms, >= 20 tokens/s per user`; `none` when nothing is stated."""
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"TTFT p{self.percentile} <= {self.ttft_ms:,g} ms")
        if self.tpot_ms is not None:
            parts.append(f"TPOT p{self.percentile} <= {self.tpot_ms:,g} ms")
        if self.min_user_tokens_per_s is not None:
            parts.append(f">= {self.min_user_tokens_per_s:,g} tokens/s per user")
        if self.max_cost_per_m_tokens is not None:
            parts.append(f"<= {self.max_cost_per_m_tokens:,g} per million output tokens")
        if self.max_accuracy_drop is not None:
            parts.append(f"accuracy at most {self.max_accuracy_drop:g} below its reference")
        return ", ".join(parts) or "none stated, so the fastest point wins"

    def as_dict(self) -> Dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


KEYS = [f.name for f in fields(Targets)]


def from_section(section: object, where: str) -> Targets:
    """A `target` mapping (a manifest's config, a YAML's section) as Targets; PlotError naming the key otherwise."""
    if section is None:
        return Targets()
    if not isinstance(section, dict):
        raise PlotError(f"{where}: expected a mapping of {', '.join(KEYS)}, got {section!r}")
    unknown = [k for k in section if k not in KEYS]
    if unknown:
        raise PlotError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(KEYS)}")
    values = {k: v for k, v in section.items() if v is not None}
    if "percentile" in values and (isinstance(values["percentile"], bool) or values["percentile"] not in PERCENTILES):
        raise PlotError(f"{where}.percentile: {values['percentile']!r} is not one of "
                        f"{', '.join(map(str, PERCENTILES))}")
    for key, value in values.items():
        if key != "percentile" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                    or not math.isfinite(value) or value <= 0):
            raise PlotError(f"{where}.{key}: must be a finite number above 0, got {value!r}")
    return Targets(**{k: (int(v) if k == "percentile" else float(v)) for k, v in values.items()})


def from_slo(slo: object) -> Targets:
    """A stream's `stream.slo` (ttft_ms, tpot_ms, percentile) as Targets, where its percentile is one results.csv
    holds (else the nearest above it)."""
    if not isinstance(slo, dict):
        return Targets()
    wanted = float(slo.get("percentile", 99))
    percentile = next((p for p in PERCENTILES if p >= wanted), PERCENTILES[-1])
    return Targets(ttft_ms=slo.get("ttft_ms"), tpot_ms=slo.get("tpot_ms"), percentile=percentile)


def overridden(base: Targets, overrides: Dict[str, Optional[float]]) -> Targets:
    """`base` with each given flag's value in place of its own."""
    given = {k: (int(v) if k == "percentile" else v) for k, v in overrides.items() if v is not None}
    return replace(base, **given)


def of_manifests(configs: List[dict]) -> Optional[Targets]:
    """The targets every source's sweep stated, when they agree (a `target` section, else a stream's slo); None when
    they differ or none stated any, so that one folder's targets never judge another's points unasked."""
    found = []
    for config in configs:
        stated = from_section(config.get("target"), "manifest.json: config.target")
        if not stated.stated and config.get("scenario") == "stream":
            stated = from_slo((config.get("stream") or {}).get("slo"))
        found.append(stated)
    stated = [t for t in found if t.stated]
    return stated[0] if stated and all(t == stated[0] for t in stated) else None


def resolve(sources: List[Path], overrides: Dict[str, Optional[float]]) -> Tuple[Targets, str]:
    """The targets for these results and where they come from: the sweeps' own (a `target` section, else a stream's
    slo; only when every source states the same), with any --best flag in place of its value."""
    from plots.load import read_manifest, results_csv_path

    configs = [read_manifest(results_csv_path(Path(s))).get("config") or {} for s in sources]
    own = of_manifests([c for c in configs if isinstance(c, dict)])
    base, origin = (own, "the sweep's own") if own is not None else (Targets(), "none stated by the sweep")
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        base = overridden(base, given)
        origin = f"{origin}, with {', '.join('--' + k.replace('_', '-') for k in given)}"
    return base, origin

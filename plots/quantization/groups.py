"""Which rows are compared: an engine's unquantized entry and the quantized entries held against it
(results.csv's `quality_reference`, harness/measure/quality.py), per model and hardware, at the points they share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import pandas as pd

from harness.config.sections import QualityConfig
from harness.measure.columns.names import R
from plots import data, load
from plots.data import SERIES

REFERENCE = R.quality_reference
BATCH_KEYS = [R.input_length, R.output_length, R.batch_size]
STREAM_KEYS = [R.input_length, R.output_length, R.request_rate, R.max_concurrency]


@dataclass(frozen=True)
class Family:
    """An unquantized entry (`reference`, a backend label) and the rows of it and of the entries compared with it."""

    reference: str
    rows: pd.DataFrame

    @property
    def series(self) -> List[str]:
        """The unquantized series first, then the quantized ones in the sweep's order."""
        order = data.series_order(self.rows)
        plain = [s for s in order if (self.rows.loc[self.rows[SERIES] == s, R.quantization] == "none").all()]
        return plain + [s for s in order if s not in plain]


def quantized_mask(table: pd.DataFrame) -> pd.Series:
    """Rows of entries compared with an unquantized one; none in results from before the column."""
    if REFERENCE not in table.columns:
        return pd.Series(False, index=table.index)
    return table[REFERENCE].fillna("").astype(str).str.strip() != ""


def families(table: pd.DataFrame) -> List[Family]:
    """Each reference entry with its quantized entries, per model and hardware (two machines are two families)."""
    quantized = table[quantized_mask(table)]
    if quantized.empty:  # results from before the column have none
        return []
    out = []
    for (model, hardware, reference), _ in quantized.groupby([R.model, R.hardware, REFERENCE], sort=False):
        same = (table[R.model] == model) & (table[R.hardware] == hardware)
        members = same & ((table[R.backend] == reference) | (table[REFERENCE].fillna("") == reference))
        out.append(Family(str(reference), table[members]))
    return out


def shared_points(family: Family, keys: Sequence[str]) -> pd.DataFrame:
    """The family's ok rows at the points where every one of its series ran ok."""
    ok = family.rows[family.rows[R.status] == data.PLOTTED_STATUS]
    if ok.empty:
        return ok
    counts = ok.groupby(list(keys), dropna=False)[SERIES].transform("nunique")
    return ok[counts == ok[SERIES].nunique()]


def accuracy_bound(sources: Sequence[Path]) -> float:
    """quality.max_logits_rel_error as the sweeps set it (the strictest of several), else its default."""
    bounds = _quality_values(sources, "max_logits_rel_error")
    return min(bounds) if bounds else QualityConfig().max_logits_rel_error


def accuracy_drop_bound(sources: Sequence[Path]) -> Optional[float]:
    """quality.max_accuracy_drop as the sweeps set it (the strictest of several), else None: no accuracy bound."""
    bounds = _quality_values(sources, "max_accuracy_drop")
    return min(bounds) if bounds else None


def _quality_values(sources: Sequence[Path], key: str) -> List[float]:
    values = []
    for source in sources:
        config = load.manifest_section(load.read_manifest(load.results_csv_path(Path(source))), "config")
        value = pd.to_numeric(load.manifest_section(config, "quality").get(key), errors="coerce")
        if pd.notna(value):
            values.append(float(value))
    return values


def price_text(row: pd.Series) -> str:
    """`err 0.014, top-1 96%` (or `err -` where the point was not compared)."""
    error, top1 = row.get(R.logits_rel_error), row.get(R.top1_agreement)
    top = "" if top1 is None or pd.isna(top1) else f", top-1 {top1:.0%}"
    return f"err {data.fmt(error)}{top}"


def point_keys(scenario: str) -> List[str]:
    return BATCH_KEYS if scenario == load.BATCH else STREAM_KEYS

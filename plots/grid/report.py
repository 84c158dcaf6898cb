"""report.md's grid ranking: the entries a backend entry's `grid` made (results.csv `grid_options` set), best
first. An entry whose stream points carry SLO attainment is ranked by its best throughput among the points within
the SLO; any other by its peak throughput over its `ok` points."""

from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import fmt
from plots.load import STREAM
from plots.stream.selections import meets_slo

HEADER = "| entry | grid options | throughput (tok/s) | at | ranked by |"


def grid_lines(table: pd.DataFrame) -> List[str]:
    """The "Grid" section, per model of the results; nothing when no row came from a grid."""
    if R.grid_options not in table.columns:
        return []
    rows = table[table[R.grid_options].fillna("").astype(str) != ""]
    if rows.empty:
        return []
    lines = ["## Grid", "", "Each entry of a `grid`, best first: by its best throughput among the stream points "
             "within the SLO where its points have SLO attainment, else by its peak throughput.", ""]
    models = list(dict.fromkeys(rows[R.model]))
    for model in models:
        if len(models) > 1:
            lines += [f"### {model}", ""]
        ranked = [_ranked(label, group) for label, group in rows[rows[R.model] == model].groupby(R.backend, sort=False)]
        ranked.sort(key=lambda r: -r[0] if r[0] is not None else float("inf"))
        lines += data.table_head(HEADER, 2) + [row for _, row in ranked] + [""]
    return lines


def _ranked(label: str, group: pd.DataFrame) -> Tuple[Optional[float], str]:
    """(the throughput it is ranked by, None for none; its table row)."""
    ok = group[group[R.status] == data.PLOTTED_STATUS]
    stream = ok[ok[R.scenario] == STREAM] if R.scenario in ok.columns else ok.iloc[0:0]
    judged = R.slo_attainment in stream.columns and stream[R.slo_attainment].notna().any()
    if judged:
        candidates, basis = stream[meets_slo(stream)], "best within the SLO"
    else:
        candidates, basis = ok, "peak"
    options = str(group[R.grid_options].iloc[0])
    # Embeddings and rerank make no output: ranked by the input tokens they take in per second.
    pooled = ok[R.output_length].map(data.pools).any()
    column, unit = (R.input_tokens_per_s, " input") if pooled else (R.throughput_tokens_per_s, "")
    if candidates.empty or column not in candidates or candidates[column].isna().all():
        return None, f"| {label} | {options} | - | - | {basis}: none |"
    best = candidates.loc[candidates[column].idxmax()]
    return float(best[column]), (f"| {label} | {options} | {fmt(best[column])}{unit} | {_load(best)} | {basis} |")


def _load(row: pd.Series) -> str:
    """Where the best point is: its batch size, or its offered rate (and concurrency cap)."""
    if row.get(R.scenario) == STREAM:
        cap = row.get(R.max_concurrency)
        rate = f"rate {fmt(row.get(R.request_rate))}"
        return rate + (f", cap {cap}" if cap is not None and not pd.isna(cap) else "")
    return f"bs {row[R.batch_size]}, in {row[R.input_length]} / out {row[R.output_length]}"

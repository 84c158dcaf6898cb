"""Each entry with task accuracy at its fastest: per series and length pair, its highest-throughput ok point, and in
a batch sweep which of those no other entry beats on both speed and accuracy beyond their intervals (the trade-off's
frontier). Shared by report.md's table and the chart.

A stream's throughput is set by the load it was offered, not by what the engine could do, so streams have no
frontier (`FRONTIER` is None there)."""

from __future__ import annotations

from typing import Optional

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import SERIES
from plots.load import BATCH

FRONTIER = "_on_frontier"
LENGTHS = [R.scenario, R.input_length, R.output_length]


def fastest_scored(table: pd.DataFrame) -> pd.DataFrame:
    """One row per series and length pair with an accuracy: its ok point of highest throughput, in series order, and
    `FRONTIER` (batch points; None for streams). Empty, without `FRONTIER`, where no entry answered tasks."""
    ok = data.plotted(table)
    if not {R.accuracy, R.accuracy_ci95_low, R.accuracy_ci95_high, R.accuracy_examples} <= set(ok.columns):
        return ok.iloc[0:0]  # results written before accuracy existed
    ok = ok[ok[R.accuracy].notna() & ok[R.throughput_tokens_per_s].notna()]
    if ok.empty:
        return ok
    best = ok.loc[ok.groupby([SERIES, *LENGTHS], sort=False)[R.throughput_tokens_per_s].idxmax()].copy()
    order = {name: i for i, name in enumerate(data.series_order(table))}
    best = best.assign(_order=best[SERIES].map(order)).sort_values([*LENGTHS, "_order"]).drop(columns="_order")
    best[FRONTIER] = [on_frontier(row, best) for _, row in best.iterrows()]
    return best


def on_frontier(row: pd.Series, best: pd.DataFrame) -> Optional[bool]:
    """False when another entry at the same lengths is faster beyond both throughput intervals and at least as
    accurate, or more accurate beyond both accuracy intervals and at least as fast: what is off the frontier costs
    speed or accuracy for nothing, and noise alone never puts it there."""
    if row[R.scenario] != BATCH:
        return None
    rivals = best[(best[LENGTHS] == row[LENGTHS]).all(axis=1)]
    speed, accuracy = R.throughput_tokens_per_s, R.accuracy
    faster = _low(rivals, speed) > _high_of(row, speed)
    more_accurate = rivals[R.accuracy_ci95_low] > row[R.accuracy_ci95_high]
    beaten = (faster & (rivals[accuracy] >= row[accuracy])) | (more_accurate & (rivals[speed] >= row[speed]))
    return not beaten.any()


def _low(rows: pd.DataFrame, column: str) -> pd.Series:
    """The interval's lower end where the row has one, else the point estimate."""
    low = rows.get(f"{column}_ci95_low")
    return rows[column] if low is None else low.fillna(rows[column])


def _high_of(row: pd.Series, column: str) -> float:
    high = row.get(f"{column}_ci95_high")
    return row[column] if high is None or pd.isna(high) else high

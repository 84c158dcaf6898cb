"""The field's headline view, as data: each ok point's output tokens/s per GPU against per user (docs/measurement.md,
"Per GPU and per user"), the frontier over every series, and the SLO's per-user speed. The PNG chart
(headline_chart.py) and the HTML report draw from these, so both show the same points and the same frontier.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.load import BATCH

PER_GPU, PER_USER = R.output_tokens_per_s_per_gpu, R.output_tokens_per_s_per_user
X_LABEL = "output tokens/s per user (1 / TPOT)"
Y_LABEL = "output tokens/s per GPU"


def with_speeds(table: pd.DataFrame) -> pd.DataFrame:
    """The numeric table with both speeds as numbers. Results written before these columns get them from their own
    columns by the same definitions; a stream point's per-user speed then from its median TPOT (the median of its
    requests' own speeds, but for an even count of requests, where the two medians can differ slightly)."""
    out = table.copy()
    throughput = pd.to_numeric(out.get(R.throughput_tokens_per_s), errors="coerce")
    devices = pd.to_numeric(out.get(R.num_devices), errors="coerce")
    batch = out.get(R.scenario, pd.Series(BATCH, index=out.index)) == BATCH
    tpot = pd.to_numeric(out[R.tpot_ms_mean].where(batch, out.get(R.tpot_ms_p50)), errors="coerce")
    derived = {PER_GPU: throughput / devices, PER_USER: 1e3 / tpot.where(tpot > 0)}
    for column, fallback in derived.items():
        # Where a row has its own value it stands; a blank one stays blank, as the derivation is blank there too.
        given = pd.to_numeric(out[column], errors="coerce") if column in out else pd.Series(np.nan, index=out.index)
        out[column] = given.fillna(fallback)
    return out


def points(ok: pd.DataFrame) -> pd.DataFrame:
    """The ok rows that have both speeds (a one-token output has no per-user speed), with the speeds as numbers."""
    rows = with_speeds(ok)
    return rows[np.isfinite(rows[PER_GPU]) & np.isfinite(rows[PER_USER])]


def frontier(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows no other row beats on both speeds, over every series, by per-user speed (slowest first): the best
    throughput per GPU each interactivity can have here."""
    # data.pareto_frontier keeps low-x, high-y points; a faster user is better, so its speed goes in negated.
    front = data.pareto_frontier(-rows[PER_USER].to_numpy(float), rows[PER_GPU].to_numpy(float))
    return rows.iloc[front].sort_values(PER_USER)


def point_label(row: pd.Series) -> str:
    """What load the point ran: its batch size, or its rate (`4/s`, `burst`) and concurrency cap (`c8`)."""
    if row.get(R.scenario, BATCH) == BATCH:
        return str(int(row[R.batch_size]))
    return data.rate_text(row[R.request_rate], "{:g}/s") + data.cap_text(row.get(R.max_concurrency), " c{}")


def slo_per_user(rows: pd.DataFrame, slo_tpot_ms: Optional[float] = None) -> Optional[Tuple[float, float]]:
    """(TPOT target in ms, the per-user speed it means) for the chart's SLO line: `slo_tpot_ms` where given, else the
    stream points' own target when they share one; None when there is none."""
    if slo_tpot_ms is None and R.slo_tpot_ms in rows:
        targets = pd.to_numeric(rows[R.slo_tpot_ms], errors="coerce").dropna().unique()
        slo_tpot_ms = float(targets[0]) if len(targets) == 1 else None
    if slo_tpot_ms is None or not slo_tpot_ms > 0:
        return None
    return slo_tpot_ms, 1e3 / slo_tpot_ms


def length_groups(rows: pd.DataFrame) -> List[Tuple[str, int, int]]:
    """(scenario, input length, output length) per chart: a batch and a stream, or two length pairs, are different
    workloads and are not set against each other."""
    keys = rows[[R.scenario, R.input_length, R.output_length]].drop_duplicates()
    return [(str(s), int(i), int(o)) for s, i, o in keys.itertuples(index=False)]

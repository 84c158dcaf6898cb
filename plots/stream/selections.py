"""Selections over a table's stream rows: the (lengths, cap) groups they are charted in, the rates on the rate
axis, which rate each series sustained under its SLO, and how each series batched.

Kept apart from data.py, which holds what batch and stream charts share, so that the stream charts and the
report's stream section read their rules from one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

import numpy as np
import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import PLOTTED_STATUS, SERIES

# What a stream's batching column may say: static, continuous, or server (an engine behind an HTTP server: how
# it batches is the server's business, so it is in neither camp of the static-vs-continuous comparison).
CONTINUOUS_BATCHING = ("continuous",)
STATIC_BATCHING = "static"


@dataclass(frozen=True)
class StreamGroup:
    """The stream points charted together: one length pair and one concurrency cap (None: no cap)."""

    input_length: int
    output_length: int
    max_concurrency: Optional[int]

    def rows(self, table: pd.DataFrame) -> pd.DataFrame:
        return table[self.mask(table)]

    def mask(self, table: pd.DataFrame) -> pd.Series:
        caps = table[R.max_concurrency]
        same_cap = caps.isna() if self.max_concurrency is None else caps == self.max_concurrency
        return ((table[R.input_length] == self.input_length) & (table[R.output_length] == self.output_length)
                & same_cap.fillna(False).astype(bool))

    @property
    def stem(self) -> str:
        cap = "" if self.max_concurrency is None else f"_cap{self.max_concurrency}"
        return f"in{self.input_length}_out{self.output_length}{cap}"

    @property
    def pools(self) -> bool:
        """Embeddings or rerank points, whose answers come whole: charted by latency and input throughput."""
        return data.pools(self.output_length)

    @property
    def text(self) -> str:
        cap = "no concurrency cap" if self.max_concurrency is None else f"max concurrency {self.max_concurrency}"
        if self.pools:
            return f"inputs of {self.input_length} tokens, no output (embeddings, rerank), {cap}"
        return f"input {self.input_length} / output {self.output_length} tokens, {cap}"


def stream_groups(rows: pd.DataFrame) -> List[StreamGroup]:
    """Every (lengths, cap) of the stream rows: lengths ascending, then caps ascending, no cap last."""
    keys = rows[[R.input_length, R.output_length, R.max_concurrency]].drop_duplicates().itertuples(index=False)
    groups = {StreamGroup(int(i), int(o), None if pd.isna(c) else int(c)) for i, o, c in keys}
    return sorted(groups, key=lambda g: (g.input_length, g.output_length, g.max_concurrency is None,
                                         g.max_concurrency or 0))


def on_rate_axis(rows: pd.DataFrame) -> pd.DataFrame:
    """Stream rows at an offered rate; a burst (rate inf) has no place on a rate axis."""
    return rows[np.isfinite(rows[R.request_rate].astype(float))]


def bursts(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[np.isinf(rows[R.request_rate].astype(float))]


def meets_slo(rows: pd.DataFrame) -> pd.Series:
    """Per stream row: at least the SLO's percentile of its requests met both targets (harness.measure.metrics.slo_met)."""
    return (rows[R.status] == PLOTTED_STATUS) & (rows[R.slo_attainment] * 100 >= rows[R.slo_percentile] - 1e-9)


def highest_rate(rates: Iterable[float]) -> Optional[float]:
    """The highest offered rate; a burst (inf) only where there is no rate at all. None for no rates."""
    rates = set(float(r) for r in rates)
    finite = [r for r in rates if np.isfinite(r)]
    return max(finite) if finite else max(rates, default=None)


def highest_sustained(rows: pd.DataFrame) -> Optional[pd.Series]:
    """The row at the highest offered rate that met the SLO (a burst: see `highest_rate`); None if none did."""
    met = rows[meets_slo(rows)]
    rate = highest_rate(met[R.request_rate])
    return None if rate is None else met[met[R.request_rate] == rate].iloc[0]


def highest_shared_ok_rate(rows: pd.DataFrame, series: Sequence[str]) -> Optional[float]:
    """The highest rate at which every one of `series` has an ok point in `rows`; None if there is none."""
    ok = rows[rows[R.status] == PLOTTED_STATUS]
    shared = None
    for name in series:
        rates = set(ok.loc[ok[SERIES] == name, R.request_rate].astype(float))
        shared = rates if shared is None else shared & rates
    return highest_rate(shared or ())


def series_batching(rows: pd.DataFrame, series: str) -> str:
    """What a series' stream rows say about how it batched (`static`, `continuous`, `server`), or ''."""
    of_series = rows[rows[SERIES] == series]
    recorded = of_series[R.batching].astype(str).str.strip() if R.batching in rows.columns else pd.Series([], dtype=str)
    return "/".join(v for v in dict.fromkeys(recorded) if v and v != "nan")


def batching_kind(rows: pd.DataFrame, series: str) -> Optional[str]:
    """`static`, `continuous` (continuous, server or vLLM batching), or None when neither or unknown."""
    batching = series_batching(rows, series)
    if batching == STATIC_BATCHING:
        return STATIC_BATCHING
    return "continuous" if batching in CONTINUOUS_BATCHING else None


def slo_text(rows: pd.DataFrame) -> str:
    """`TTFT <= 500 ms and TPOT <= 50 ms for at least 90% of requests`; each distinct SLO, joined by `; `."""
    slos = rows[[R.slo_ttft_ms, R.slo_tpot_ms, R.slo_percentile]].dropna().drop_duplicates()
    return "; ".join(f"TTFT <= {t:g} ms and TPOT <= {p:g} ms for at least {q:g}% of requests"
                     for t, p, q in slos.itertuples(index=False)) or "no SLO recorded"

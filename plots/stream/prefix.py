"""Prefix caching on vs off on the same stream: TTFT of each series at the highest rate every series of the group ran
ok, its prefix-cache hit rate on the bar, and the report's line per (on, off) pair of series that batch alike (two
in-process engines, or two servers: an HTTP hop is no part of what caching saves). Drawn for the groups that hold a
series with prefix caching on and one with it off (results.csv's `prefix_caching`).
"""

from __future__ import annotations

from itertools import product
from typing import List, Optional, Tuple

import numpy as np
import pandas as pd

from harness.measure.columns.names import R
from plots import data, style
from plots.charts import Chart, ChartContext, finish, model_and_dtype
from plots.data import SERIES, fmt
from plots.stream import selections
from plots.stream.selections import StreamGroup

SECTION = "Stream: prefix caching on vs off"
COLUMN = R.prefix_caching


def caching_of(rows: pd.DataFrame, series: str) -> Optional[bool]:
    """Whether a series ran with prefix caching, as its rows say (None: unknown, e.g. a server not started here)."""
    if COLUMN not in rows.columns:
        return None
    values = rows.loc[rows[SERIES] == series, COLUMN].dropna().astype(str).str.lower().unique()
    if len(values) != 1:
        return None
    return {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}.get(values[0])


def split(rows: pd.DataFrame) -> Tuple[List[str], List[str]]:
    """The group's series with prefix caching on, and those with it off."""
    kinds = {s: caching_of(rows, s) for s in data.series_order(rows)}
    return [s for s, k in kinds.items() if k is True], [s for s, k in kinds.items() if k is False]


def _compared(ctx_rows: pd.DataFrame, group: StreamGroup) -> Optional[Tuple[pd.DataFrame, float]]:
    """The group's ok rows at the highest rate all its on and off series ran ok, or None."""
    rows = group.rows(ctx_rows)
    on, off = split(rows)
    if not on or not off:
        return None
    rate = selections.highest_shared_ok_rate(rows, on + off)
    if rate is None:
        return None
    at = rows[(rows[R.request_rate] == rate) & (rows[R.status] == data.PLOTTED_STATUS)]
    return at[at[SERIES].isin(on + off)], rate


def prefix_caching_chart(ctx: ChartContext) -> List[Chart]:
    charts = []
    for group in selections.stream_groups(ctx.ok):
        compared = _compared(ctx.ok, group)
        if compared is not None:
            charts.append(_one(ctx, group, *compared))
    return charts


def _one(ctx: ChartContext, group: StreamGroup, at: pd.DataFrame, rate: float) -> Chart:
    fig, ax = style.new_figure()
    names = list(at[SERIES])
    x = np.arange(len(names))
    for offset, (column, label, hatch) in zip((-0.2, 0.2), ((R.ttft_ms_p50, "p50", ""), (R.ttft_ms_p99, "p99", "//"))):
        colors = [ctx.palette.series_colors[n] for n in names]
        bars = ax.bar(x + offset, at[column], width=0.38, color=colors, hatch=hatch, edgecolor="white", label=label)
        if column == R.ttft_ms_p50:
            hits = at[R.prefix_cache_hit_rate] if R.prefix_cache_hit_rate in at.columns else [None] * len(names)
            for bar, hit in zip(bars, hits):
                text = "hit rate -" if hit is None or pd.isna(hit) else f"hit rate {hit:.0%}"
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                            fontsize=8.5, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x, [f"{n}\n(caching {'on' if caching_of(at, n) else 'off'})" for n in names])
    ax.set_ylabel("time to first token (ms)")
    ax.legend(title="TTFT", frameon=False)
    load = "a burst" if np.isinf(rate) else f"{rate:g} requests/s"
    title = f"{model_and_dtype(at)}: TTFT with prefix caching on and off, {load}\n{group.text}"
    ax.set_title(title, loc="left", fontweight="bold")
    caption = ("Solid: TTFT p50, hatched: p99, at the highest rate every series ran ok; the label is the share of "
               "prompt tokens served from the prefix cache")
    return finish(ctx, fig, f"stream_prefix_{group.stem}", SECTION, title.replace("\n", ", "), caption + ".")


def prefix_caching_lines(rows: pd.DataFrame) -> List[str]:
    """report.md: per (on, off) pair, TTFT p50 with and without the cache and the hit rate."""
    lines = []
    for group in selections.stream_groups(rows):
        compared = _compared(rows, group)
        if compared is None:
            continue
        at, rate = compared
        at = at.set_index(SERIES)
        on, off = split(at.reset_index())
        load = "in a burst" if np.isinf(rate) else f"at {rate:g} requests/s"
        where = f"{group.text[0].upper()}{group.text[1:]}"
        for a, b in product(on, off):
            if selections.series_batching(at.reset_index(), a) == selections.series_batching(at.reset_index(), b):
                lines += [_pair_line(where, load, a, at.loc[a], b, at.loc[b]), ""]
    return ["### Prefix caching", "", *lines] if lines else []


def _pair_line(where: str, load: str, on: str, a: pd.Series, off: str, b: pd.Series) -> str:
    hit = a.get(R.prefix_cache_hit_rate)
    hit_text = "unknown" if hit is None or pd.isna(hit) else f"{hit:.0%}"
    ratio = a[R.ttft_ms_p50] / b[R.ttft_ms_p50] if b[R.ttft_ms_p50] else float("nan")
    return (f"{where}, {load}: TTFT p50 {fmt(a[R.ttft_ms_p50])} ms with prefix caching ({on}, hit rate {hit_text}) "
            f"vs {fmt(b[R.ttft_ms_p50])} ms without ({off}), {ratio:.2f}x; p99 {fmt(a[R.ttft_ms_p99])} vs "
            f"{fmt(b[R.ttft_ms_p99])} ms.")

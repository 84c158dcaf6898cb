"""report.md's LoRA section: per adapter, the requests each named and their latencies, from requests.csv, at the
highest offered rate each series ran ok (docs/measurement.md, "LoRA adapters"). The point's own row in results.csv
holds the whole mix; these rows split it by adapter, hot ones and the tail."""

from __future__ import annotations

from typing import List

import numpy as np
import pandas as pd

from harness.measure.columns.names import Q, R
from plots import data
from plots.charts import ChartContext
from plots.data import SERIES, fmt, rate_text
from plots.load import STREAM
from plots.stream import selections
from plots.stream.requests import requests_at

HEADER = ("| adapter | requests | share | failed | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | E2E p50 (ms) "
          "| E2E p99 (ms) |")


def adapter_lines(ctx: ChartContext) -> List[str]:
    """The "LoRA adapters" section; nothing when no request named an adapter."""
    requests = ctx.requests
    if requests is None or not named_any(requests):
        return []
    lines = ["## LoRA adapters", "", "Each request named one adapter, drawn from its entry's `lora.mix`. Per adapter, "
             "at the highest offered rate the series ran ok; latencies from each request's scheduled arrival.", ""]
    rows = data.of_scenario(ctx.ok, STREAM)
    for group in selections.stream_groups(rows):
        for series in data.series_order(group.rows(rows)):
            rates = group.rows(rows).loc[lambda r: r[SERIES] == series, R.request_rate].astype(float)
            if rates.empty:
                continue
            rate = float(rates.max())
            named = requests_at(ctx, group, rate)
            named = named[named[SERIES] == series]
            if not named_any(named):  # an entry without adapters, beside those with
                continue
            lines += [f"### {series}, {group.text}, at {rate_text(rate, '{:g}/s')}", "", *adapter_table(named), ""]
    return lines


def named_any(requests: pd.DataFrame) -> bool:
    """Whether any of these requests.csv rows named an adapter (an empty cell names none)."""
    return Q.adapter in requests.columns and bool(requests[Q.adapter].fillna("").astype(str).ne("").any())


def adapter_table(requests: pd.DataFrame) -> List[str]:
    """One row per adapter, most requests first, then every request together."""
    counts = requests[Q.adapter].value_counts()
    out = data.table_head(HEADER, 1)
    for adapter in counts.index:
        out.append(_row(str(adapter), requests[requests[Q.adapter] == adapter], len(requests)))
    return out + [_row("all", requests, len(requests))]


def _row(name: str, requests: pd.DataFrame, total: int) -> str:
    done = requests[requests[Q.error].fillna("").astype(str) == ""]

    def percentile(column: str, q: float) -> str:
        values = pd.to_numeric(done[column], errors="coerce").dropna()
        return fmt(float(np.percentile(values, q))) if len(values) else "-"

    cells = [name, str(len(requests)), f"{len(requests) / total:.0%}", str(len(requests) - len(done)),
             percentile(Q.ttft_ms, 50), percentile(Q.ttft_ms, 99), percentile(Q.tpot_ms, 50), percentile(Q.e2e_ms, 50),
             percentile(Q.e2e_ms, 99)]
    return "| " + " | ".join(cells) + " |"

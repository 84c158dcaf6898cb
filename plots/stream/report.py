"""report.md's stream section: a table per (lengths, cap) group, warnings where the client limited the
offered load, and the measured static vs continuous batching factors."""

from __future__ import annotations

from itertools import product
from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import SERIES, fmt, rate_text
from plots.stream import selections
from plots.stream.prefix import prefix_caching_lines
from plots.stream.selections import StreamGroup

# Over this p99 send slip (ms) the client, not the engine, limited the offered load (harness.measure.metrics.SLIP_WARN_MS).
SLIP_WARN_MS = 5.0
STREAM_HEADER = ("| series | batching | points ok | highest sustained rate (requests/s) | TTFT p50 (ms) "
                 "| TTFT p99 (ms) | TPOT p50 (ms) | E2E p99 (ms) | goodput (requests/s) |")


def stream_lines(rows: pd.DataFrame) -> List[str]:
    """The whole stream section; nothing when there are no stream rows."""
    if rows.empty:
        return []
    lines = ["## Request streams", "",
             f"SLO: {selections.slo_text(rows)}. A rate is sustained when that share of its requests met both "
             "targets; the columns after it are the figures at that rate. Latencies run from each request's "
             "scheduled arrival.", ""]
    for group in selections.stream_groups(rows):
        table = pooled_table(group.rows(rows)) if group.pools else stream_table(group.rows(rows))
        lines += [f"### {group.text[0].upper()}{group.text[1:]}", "", *table, ""]
    lines += slip_warnings(rows)
    lines += static_vs_continuous(rows)
    lines += prefix_caching_lines(rows)
    return lines


def stream_table(group: pd.DataFrame) -> List[str]:
    lines = data.table_head(STREAM_HEADER, 2)
    for series in data.series_order(group):
        of_series = group[group[SERIES] == series]
        ok = (of_series[R.status] == data.PLOTTED_STATUS).sum()
        cells = [series, selections.series_batching(group, series) or "-", f"{ok} of {len(of_series)}"]
        best = selections.highest_sustained(of_series)
        if best is None:
            cells += ["none"] + ["-"] * 5
        else:
            cells += [rate_text(best[R.request_rate], "{:g}"), fmt(best[R.ttft_ms_p50]), fmt(best[R.ttft_ms_p99]),
                      fmt(best[R.tpot_ms_p50]), fmt(best[R.e2e_ms_p99]), fmt(best[R.goodput])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


POOLED_HEADER = ("| series | points ok | highest sustained rate (requests/s) | inputs per request | latency p50 (ms) "
                 "| latency p99 (ms) | inputs/s | input tokens/s | goodput (requests/s) |")


def pooled_table(group: pd.DataFrame) -> List[str]:
    """Embeddings and rerank: an answer comes whole, so latency (the SLO's ttft_ms bounds it) and what they take in
    per second are their figures (docs/measurement.md, "Embeddings and rerank")."""
    lines = data.table_head(POOLED_HEADER, 1)
    for series in data.series_order(group):
        of_series = group[group[SERIES] == series]
        ok = (of_series[R.status] == data.PLOTTED_STATUS).sum()
        cells = [series, f"{ok} of {len(of_series)}"]
        best = selections.highest_sustained(of_series)
        if best is None:
            cells += ["none"] + ["-"] * 6
        else:
            cells += [rate_text(best[R.request_rate], "{:g}"), f"{float(best[R.inputs_per_request]):g}",
                      fmt(best[R.e2e_ms_p50]), fmt(best[R.e2e_ms_p99]), fmt(best[R.inputs_per_s]),
                      fmt(best[R.input_tokens_per_s]), fmt(best[R.goodput])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def slip_warnings(rows: pd.DataFrame) -> List[str]:
    """A line per point whose requests left the client late: its offered load was not the one asked for."""
    late = rows[rows[R.send_slip_ms_p99] > SLIP_WARN_MS]
    lines = []
    for _, row in data.plotted(late).iterrows():
        group = StreamGroup(int(row[R.input_length]), int(row[R.output_length]),
                            None if pd.isna(row[R.max_concurrency]) else int(row[R.max_concurrency]))
        lines += [f"> **Warning:** {row[SERIES]} at {rate_text(row[R.request_rate])} ({group.text}): p99 send slip "
                  f"{fmt(row[R.send_slip_ms_p99])} ms > {SLIP_WARN_MS:g} ms. The client sent requests late, so it, "
                  "not the engine, limited the offered load.", ""]
    return lines


def static_vs_continuous(rows: pd.DataFrame) -> List[str]:
    """Per group holding a static and a continuous series: E2E p50 and goodput factors at their highest shared
    ok rate."""
    paragraphs = []
    for group in selections.stream_groups(rows):
        of_group = group.rows(rows)
        kinds = {s: selections.batching_kind(of_group, s) for s in data.series_order(of_group)}
        static = [s for s, k in kinds.items() if k == selections.STATIC_BATCHING]
        continuous = [s for s, k in kinds.items() if k == "continuous"]
        paragraphs += [_compare(of_group, group, s, c) for s, c in product(static, continuous)]
    if not paragraphs:
        return []
    return ["### Static vs continuous batching", "", *[line for p in paragraphs for line in (p, "")]]


def _compare(rows: pd.DataFrame, group: StreamGroup, static: str, continuous: str) -> str:
    where = f"{group.text[0].upper()}{group.text[1:]}"
    rate = selections.highest_shared_ok_rate(rows, [static, continuous])
    if rate is None:
        return (f"{where}: {static} (static) and {continuous} (continuous) ran ok at no common rate, so there is "
                "no like-for-like comparison.")
    at = rows[(rows[R.request_rate] == rate) & (rows[R.status] == data.PLOTTED_STATUS)].set_index(SERIES)
    s, c = at.loc[static], at.loc[continuous]
    load = "in a burst (every request at once)" if rate == float("inf") else f"at {rate:g} requests/s"
    return (f"{where}: {load}, the highest rate both {static} (static) and {continuous} (continuous) ran ok, "
            + _ratio("E2E p50", "static", "continuous", s[R.e2e_ms_p50], c[R.e2e_ms_p50], "ms") + ", and "
            + _ratio("goodput", "continuous", "static", c[R.goodput], s[R.goodput], "requests/s") + ".")


def _ratio(what: str, top: str, bottom: str, a: float, b: float, unit: str) -> str:
    """`E2E p50 is 3.21x as much with static as with continuous batching (1,234 vs 384 ms)`."""
    if pd.isna(a) or pd.isna(b) or b == 0:
        return f"{what} is {fmt(a)} {unit} with {top} and {fmt(b)} with {bottom} batching (no finite factor)"
    return f"{what} is {a / b:.2f}x as much with {top} as with {bottom} batching ({fmt(a)} vs {fmt(b)} {unit})"

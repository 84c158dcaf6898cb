"""The stream charts: latency, output throughput and goodput vs offered request rate, the distribution of
per-request TTFT at one rate, and (plots/stream/server.py) the server's own queue and KV cache over time. One
figure per (input, output, concurrency cap) group.

A burst (every request at once, request_rate inf) has no place on a rate axis: its numbers are in the
caption instead. Points that did not end ok are named in the caption, as in the batch charts.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from harness.measure.columns.names import Q, R
from plots import data, style
from plots.charts import (
    Chart,
    ChartContext,
    ChartJob,
    decorate,
    draw_series_curve,
    finish,
    legend_right,
    model_and_dtype,
    scenario_jobs,
)
from plots.data import SERIES
from plots.load import STREAM
from plots.stream import selections
from plots.stream.selections import StreamGroup
from plots.stream.prefix import prefix_caching_chart
from plots.stream.requests import requests_at
from plots.stream.server import server_timeline
from plots.stream.turns import ttft_vs_context

RATE_LABEL = "offered request rate (requests/s)"
SUSTAINED_RING_SIZE = 15
# Each panel's results.csv column per percentile drawn (style.PERCENTILE_STYLES' keys), and its name.
LATENCY_PANELS = (({"p50": R.ttft_ms_p50, "p99": R.ttft_ms_p99}, "TTFT"),
                  ({"p50": R.e2e_ms_p50, "p99": R.e2e_ms_p99}, "E2E latency"))
# Embeddings and rerank: an answer comes whole, so its latency is the one panel (and its TTFT, which rows leave out).
POOLED_PANELS = (({"p50": R.e2e_ms_p50, "p99": R.e2e_ms_p99}, "Latency (the whole answer)"),)


def _title(rows: pd.DataFrame, what: str, group: StreamGroup) -> str:
    return f"{model_and_dtype(rows)}: {what}\n{group.text}"


def _caption(ctx: ChartContext, group: StreamGroup, *parts: str) -> str:
    """What the chart leaves out, in sentences: burst points, points not ok, then anything else given."""
    dropped = ctx.dropped_caption(group.mask(ctx.table))
    return " ".join(p.rstrip(".") + "." for p in (*parts, dropped) if p)


def _burst_text(ctx: ChartContext, group: StreamGroup, describe) -> str:
    """`Burst (every request at once, not on the rate axis): vllm: ...; hf: ...`, or ''."""
    rows = selections.bursts(group.rows(ctx.ok))
    items = [f"{row[SERIES]}: {describe(row)}" for _, row in rows.iterrows()]
    return "Burst (every request at once, not on the rate axis): " + "; ".join(items) if items else ""


def _rate_groups(ctx: ChartContext) -> List[StreamGroup]:
    """The groups with at least one ok point at an offered rate: those get rate charts."""
    return [g for g in selections.stream_groups(ctx.ok) if not selections.on_rate_axis(g.rows(ctx.ok)).empty]


def _fmt(value: float) -> str:
    return style.human_number(float(f"{value:.3g}"))


# -- 1. latency vs rate ------------------------------------------------------------------------------------

def latency_vs_rate(ctx: ChartContext) -> List[Chart]:
    """TTFT and E2E latency panels, p50 solid and p99 dashed, a line per series."""
    return [_latency_vs_rate_one(ctx, group) for group in _rate_groups(ctx)]


def _latency_vs_rate_one(ctx: ChartContext, group: StreamGroup) -> Chart:
    rows = selections.on_rate_axis(group.rows(ctx.ok))
    panels = POOLED_PANELS if group.pools else LATENCY_PANELS
    fig, axes = style.new_grid(1, len(panels))
    for ax, (columns, name) in zip(axes[0], panels):
        _latency_panel(ax, rows, columns, ctx.palette)
        ax.set_title(name, fontsize=11.5)
        ax.set_xlabel(RATE_LABEL)
        ax.set_ylabel(f"{name}, from scheduled arrival (ms)")
    title = _title(rows, "request latency vs offered rate", group)
    fig.subplots_adjust(wspace=0.28, top=1.0 - 1.15 / fig.get_figheight())
    fig.suptitle(title, x=axes[0, 0].get_position().x0, y=1.0 - 0.2 / fig.get_figheight(), ha="left",
                 va="top", fontweight="bold")
    _percentile_legend(fig, axes[0, -1], ctx.palette, data.series_order(rows))
    burst = _burst_text(ctx, group, lambda r: _latency_text(r, group.pools))
    return finish(ctx, fig, f"stream_latency_vs_rate_{group.stem}", "Stream: latency vs request rate",
                   title.replace("\n", ", "), _caption(ctx, group, burst))


def _latency_text(row: pd.Series, pools: bool) -> str:
    """A burst's latencies for a caption: E2E, after TTFT where the answer streams (not embeddings or rerank)."""
    e2e = f"E2E p50 {_fmt(row[R.e2e_ms_p50])} / p99 {_fmt(row[R.e2e_ms_p99])} ms"
    return e2e if pools else f"TTFT p50 {_fmt(row[R.ttft_ms_p50])} / p99 {_fmt(row[R.ttft_ms_p99])} ms, {e2e}"


def _latency_panel(ax: Axes, rows: pd.DataFrame, columns: Dict[str, str], palette: style.Palette) -> None:
    for percentile, linestyle in style.PERCENTILE_STYLES.items():
        for curve in data.build_curves(rows, R.request_rate, columns[percentile]):
            ax.plot(curve.x, curve.y, color=palette.series_colors[curve.name], linestyle=linestyle,
                    marker=palette.series_markers[curve.name], zorder=3,
                    markerfacecolor="white" if percentile != "p50" else None)
    style.set_rate_axis(ax, rows[R.request_rate])
    style.set_value_axis(ax, "y", pd.concat([rows[columns[p]] for p in style.PERCENTILE_STYLES]))
    ax.margins(x=0.06, y=0.1)


def _percentile_legend(fig, ax: Axes, palette: style.Palette, series: List[str]) -> None:
    """Series colours, then what the line styles mean, in one legend right of the last panel."""
    handles = [Line2D([], [], color=palette.series_colors[s], marker=palette.series_markers[s]) for s in series]
    labels = list(series)
    for percentile, linestyle in style.PERCENTILE_STYLES.items():
        handles.append(Line2D([], [], color="0.3", linestyle=linestyle))
        labels.append(percentile)
    top_right = ax.get_position()
    fig.legend(handles, labels, title="series", loc="upper left", frameon=False, alignment="left",
               bbox_to_anchor=(top_right.x1 + 0.015, top_right.y1))


# -- 2. throughput vs rate ---------------------------------------------------------------------------------

def throughput_vs_rate(ctx: ChartContext) -> List[Chart]:
    return [_throughput_vs_rate_one(ctx, group) for group in _rate_groups(ctx)]


def _throughput_vs_rate_one(ctx: ChartContext, group: StreamGroup) -> Chart:
    rows = selections.on_rate_axis(group.rows(ctx.ok))
    # Embeddings and rerank make no output: the prompt tokens they take in per second are their throughput.
    column, what = (R.input_tokens_per_s, "input") if group.pools else (R.throughput_tokens_per_s, "output")
    fig, ax = style.new_figure()
    for curve in data.build_curves(rows, R.request_rate, column):
        draw_series_curve(ax, curve, ctx.palette)
    style.set_rate_axis(ax, rows[R.request_rate])
    style.set_value_axis(ax, "y", rows[column])
    ax.margins(x=0.06, y=0.1)
    title = _title(rows, f"{what} throughput vs offered rate", group)
    decorate(ax, title, RATE_LABEL, f"{what} throughput (tokens/s)")
    legend_right(ax, "series")
    burst = _burst_text(ctx, group, lambda r: f"{_fmt(r[column])} {what} tokens/s")
    return finish(ctx, fig, f"stream_throughput_vs_rate_{group.stem}", f"Stream: {what} throughput vs request rate",
                   title.replace("\n", ", "), _caption(ctx, group, burst))


# -- 3. goodput vs rate ------------------------------------------------------------------------------------

def goodput_vs_rate(ctx: ChartContext) -> List[Chart]:
    """Requests/s meeting the SLO against the ideal y = x; a ring on each series' highest sustained rate."""
    return [_goodput_vs_rate_one(ctx, group) for group in _rate_groups(ctx)]


def _goodput_vs_rate_one(ctx: ChartContext, group: StreamGroup) -> Chart:
    rows = selections.on_rate_axis(group.rows(ctx.ok))
    fig, ax = style.new_figure()
    ideal = np.geomspace(rows[R.request_rate].min(), rows[R.request_rate].max(), 64)  # smooth on a log2 axis too
    ax.plot(ideal, ideal, color="0.45", linestyle=":", linewidth=1.5, zorder=2, label="ideal: every request met the SLO")
    for curve in data.build_curves(rows, R.request_rate, R.goodput):
        draw_series_curve(ax, curve, ctx.palette)
    sustained = _mark_sustained(ax, rows, ctx.palette)
    style.set_rate_axis(ax, rows[R.request_rate])
    style.set_linear_axis(ax, "y")  # goodput may be 0: no log scale
    ax.margins(x=0.06, y=0.05)  # room below 0, so a point at 0 is not cut in half by the axis
    title = _title(rows, "goodput vs offered rate", group)
    decorate(ax, title, RATE_LABEL, "goodput (requests/s meeting the SLO)")
    legend_right(ax, "series")
    burst = _burst_text(ctx, group, lambda r: f"goodput {_fmt(r[R.goodput])} requests/s")
    slo = (f"SLO: {selections.slo_text(group.rows(ctx.table))}. "
           f"Ringed: the highest rate each series sustained ({sustained})")
    return finish(ctx, fig, f"stream_goodput_vs_rate_{group.stem}", "Stream: goodput vs request rate",
                   title.replace("\n", ", "), _caption(ctx, group, slo, burst))


def _mark_sustained(ax: Axes, rows: pd.DataFrame, palette: style.Palette) -> str:
    """A ring on each series' highest rate meeting the SLO; returns `hf 2/s, vllm 4/s` (`none` where none)."""
    texts = []
    for series in data.series_order(rows):
        best = selections.highest_sustained(rows[rows[SERIES] == series])
        if best is None:
            texts.append(f"{series}: none")
            continue
        ax.plot([best[R.request_rate]], [best[R.goodput]], linestyle="none", marker="o", markerfacecolor="none",
                markersize=SUSTAINED_RING_SIZE, markeredgewidth=1.6, color=palette.series_colors[series], zorder=4)
        texts.append(f"{series}: {best[R.request_rate]:g}/s")
    ax.plot([], [], linestyle="none", marker="o", markerfacecolor="none", markersize=SUSTAINED_RING_SIZE * 0.7,
            markeredgewidth=1.4, color="0.3", label="highest rate meeting the SLO")
    return ", ".join(texts)


# -- 4. TTFT distribution ----------------------------------------------------------------------------------

def ttft_cdf(ctx: ChartContext) -> List[Chart]:
    """Per-request TTFT (requests.csv) at the highest rate every series of the group ran ok."""
    return [_ttft_cdf_one(ctx, group) for group in _rate_groups(ctx)]


def _ttft_cdf_one(ctx: ChartContext, group: StreamGroup) -> Chart:
    # An embeddings or rerank answer comes whole: its latency is its TTFT, and the SLO's ttft_ms bounds it.
    column, name = (Q.e2e_ms, "latency") if group.pools else (Q.ttft_ms, "TTFT")
    section, series = f"Stream: {name} distribution", data.series_order(group.rows(ctx.table))
    rate = selections.highest_shared_ok_rate(selections.on_rate_axis(group.rows(ctx.table)), series)
    what = f"per-request {name} ({group.text})"
    if rate is None:
        return Chart(section, what, [], f"No {name} distribution for {group.text}: no offered rate at which "
                                         f"every series ({', '.join(series)}) ran ok.")
    requests = requests_at(ctx, group, rate)
    if requests.empty:
        return Chart(section, what, [], f"No {name} distribution for {group.text}: no requests.csv beside "
                                         "results.csv holds these points (written by an older harness?).")
    fig, ax = style.new_figure()
    for series_name in series:
        _draw_cdf(ax, requests.loc[requests[SERIES] == series_name, column], series_name, ctx.palette)
    _slo_line(ax, group.rows(ctx.table), name)
    style.set_value_axis(ax, "x", requests[column])
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(ticker.PercentFormatter(1.0))
    rows = group.rows(ctx.ok)
    title = _title(rows, f"{name} per request at {rate:g} requests/s", group)
    decorate(ax, title, f"{name}, from scheduled arrival (ms)", "share of requests at or below")
    legend_right(ax, "series (requests)")
    missing = [s for s in series if not (requests[SERIES] == s).any()]
    note = f"No requests.csv rows for: {', '.join(missing)}" if missing else ""
    picked = f"At {rate:g} requests/s, the highest offered rate at which every series ran ok"
    return finish(ctx, fig, f"stream_ttft_cdf_{group.stem}", section, title.replace("\n", ", "),
                   " ".join(p + "." for p in (picked, note) if p))


def _draw_cdf(ax: Axes, values: pd.Series, name: str, palette: style.Palette) -> None:
    """A step up at each request: the share of requests at or below each value; the legend counts them."""
    ordered = np.sort(values.dropna().to_numpy(float))
    if ordered.size:
        ax.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post", zorder=3,
                color=palette.series_colors[name], label=f"{name} ({ordered.size})")


def _slo_line(ax: Axes, rows: pd.DataFrame, name: str) -> None:
    targets = rows[R.slo_ttft_ms].dropna().unique()
    if len(targets) == 1:
        ax.axvline(targets[0], color="0.45", linestyle=":", linewidth=1.5, zorder=2,
                   label=f"SLO: {name} <= {targets[0]:g} ms")


ALL_STREAM_CHARTS = (latency_vs_rate, throughput_vs_rate, goodput_vs_rate, ttft_cdf, server_timeline,
                     prefix_caching_chart, ttft_vs_context)


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """Every stream chart, in the order the report shows them; none when no stream point ended ok."""
    return scenario_jobs(ctx, STREAM, ALL_STREAM_CHARTS)

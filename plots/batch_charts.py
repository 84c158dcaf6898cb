"""The five batch charts (stream/charts.py draws the stream ones; charts.py holds what every chart shares). Each
function draws one kind of chart for every slice it applies to and returns what it wrote as `Chart` records, which
the report embeds in order.

Every chart reads the `ok` rows only; the rows that were left out (oom, skipped, error) are named
in the chart's caption so a missing point is never silent.
"""

from __future__ import annotations

from typing import List, Tuple

import pandas as pd
from matplotlib.axes import Axes

from harness.measure.columns.names import R
from plots import data, style
from plots.charts import (
    Chart,
    ChartContext,
    ChartJob,
    GridChart,
    decorate,
    draw_series_curve,
    finish,
    legend_right,
    model_and_dtype,
    scenario_jobs,
    series_grid,
)
from plots.data import SERIES, Curve
from plots.labels import PointLabel, place_point_labels
from plots.load import BATCH


def tokens(count: int) -> str:
    return f"{count} token" if count == 1 else f"{count} tokens"


# -- 1. latency vs throughput -------------------------------------------------------------------------

def latency_vs_throughput(ctx: ChartContext) -> List[Chart]:
    """One chart per (input, output) length pair: a curve per series through its batch sizes."""
    return [_latency_vs_throughput_one(ctx, pair) for pair in data.length_pairs(ctx.ok)]


def _latency_vs_throughput_one(ctx: ChartContext, pair: Tuple[int, int]) -> Chart:
    input_length, output_length = pair
    rows = _at_lengths(ctx.ok, pair)
    fig, ax = style.new_figure()
    curves = data.build_curves(rows, R.latency_ms_mean, R.throughput_tokens_per_s, order_by=R.batch_size)
    for curve in curves:
        draw_series_curve(ax, curve, ctx.palette)
    _draw_pareto(ax, rows)
    style.set_value_axis(ax, "x", rows[R.latency_ms_mean])
    style.set_value_axis(ax, "y", rows[R.throughput_tokens_per_s])
    ax.margins(0.08)
    title = (f"{model_and_dtype(rows)}: latency vs throughput, "
             f"input {input_length} / output {tokens(output_length)}")
    decorate(ax, title, "latency per batch, mean (ms)", "output throughput (tokens/s)")
    legend_right(ax, "series", note="numbers at points: batch size")
    place_point_labels(ax, [PointLabel(x, y, str(b), ctx.palette.series_colors[c.name])
                            for c in curves for x, y, b in zip(c.x, c.y, c.batch_sizes)])
    caption = ctx.dropped_caption(_at_lengths_mask(ctx.table, pair))
    stem = f"latency_vs_throughput_in{input_length}_out{output_length}"
    return finish(ctx, fig, stem, "Latency vs throughput", title, caption)


def _draw_pareto(ax: Axes, rows: pd.DataFrame) -> None:
    """A wide translucent band through the frontier points: it highlights them without hiding markers."""
    latency = rows[R.latency_ms_mean].to_numpy(float)
    rate = rows[R.throughput_tokens_per_s].to_numpy(float)
    front = data.pareto_frontier(latency, rate)
    ax.plot(latency[front], rate[front], color="0.55", linewidth=9, alpha=0.28, solid_capstyle="round",
            zorder=1, label="Pareto frontier")


# -- 2. latency vs output length ----------------------------------------------------------------------

def latency_vs_output_length(ctx: ChartContext) -> List[Chart]:
    """Log-log, one line per batch size; one chart per (series, input length)."""
    charts = []
    for series in data.series_order(ctx.ok):
        for input_length in sorted(ctx.ok.loc[ctx.ok[SERIES] == series, R.input_length].unique()):
            charts.append(_latency_vs_output_one(ctx, series, int(input_length)))
    return charts


def _latency_vs_output_one(ctx: ChartContext, series: str, input_length: int) -> Chart:
    rows = ctx.ok[(ctx.ok[SERIES] == series) & (ctx.ok[R.input_length] == input_length)]
    fig, ax = style.new_figure()
    for curve in data.build_curves(rows, R.output_length, R.latency_ms_mean, by=R.batch_size):
        _draw_batch_curve(ax, curve, ctx.palette)
    style.set_size_axis(ax, "x", rows[R.output_length])
    style.set_value_axis(ax, "y", rows[R.latency_ms_mean], force_log=True)
    title = f"{model_and_dtype(rows)}: latency vs output length, input {tokens(input_length)}\n{series}"
    decorate(ax, title, "output length (tokens)", "latency per batch, mean (ms)")
    legend_right(ax, "batch size")
    mask = (ctx.table[SERIES] == series) & (ctx.table[R.input_length] == input_length)
    caption = ctx.dropped_caption(mask, with_lengths=True)
    stem = f"latency_vs_output_length_{ctx.slugs[series]}_in{input_length}"
    return finish(ctx, fig, stem, "Latency vs output length", title.replace("\n", ", "), caption)


# -- 3. TTFT vs input length --------------------------------------------------------------------------

def ttft_vs_input_length(ctx: ChartContext) -> List[Chart]:
    """One line per batch size, one chart per series."""
    return [_ttft_one(ctx, series) for series in data.series_order(ctx.ok)]


def _ttft_one(ctx: ChartContext, series: str) -> Chart:
    rows = ctx.ok[ctx.ok[SERIES] == series]
    medians = data.median_over_output_lengths(rows, R.ttft_ms_mean)
    fig, ax = style.new_figure()
    for curve in data.build_curves(medians, R.input_length, R.ttft_ms_mean, by=R.batch_size):
        _draw_batch_curve(ax, curve, ctx.palette)
    style.set_size_axis(ax, "x", rows[R.input_length])
    style.set_value_axis(ax, "y", medians[R.ttft_ms_mean])
    outputs = ", ".join(str(o) for o in sorted(rows[R.output_length].unique()))
    title = f"{model_and_dtype(rows)}: time to first token vs input length\n{series}"
    decorate(ax, title, "input length (tokens)", f"TTFT, mean (ms)\nmedian over output lengths {outputs}")
    legend_right(ax, "batch size")
    caption = ctx.dropped_caption(ctx.table[SERIES] == series, with_lengths=True)
    return finish(ctx, fig, f"ttft_vs_input_length_{ctx.slugs[series]}", "Time to first token vs input length",
                   title.replace("\n", ", "), caption)


# -- 4 and 5. per-batch-size grids ----------------------------------------------------------------------

def tpot_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    """Decode ms per output token; output length 1 has no decode step, so it gets no panel."""
    rows = ctx.ok[ctx.ok[R.output_length] > 1].dropna(subset=[R.tpot_ms_mean])
    if rows.empty:
        return []
    grid = GridChart(R.tpot_ms_mean, "TPOT, mean (ms per token)",
                     "decode time per output token (TPOT) vs batch size", "tpot_vs_batch_size")
    return [series_grid(ctx, rows, grid, caption_mask=ctx.table[R.output_length] > 1)]


def throughput_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    grid = GridChart(R.throughput_tokens_per_s, "output throughput (tokens/s)", "output throughput vs batch size",
                     "throughput_vs_batch_size")
    return [series_grid(ctx, ctx.ok, grid, caption_mask=ctx.table[R.status].notna())]


# -- drawing only the batch charts do ----------------------------------------------------------------

def _draw_batch_curve(ax: Axes, curve: Curve, palette: style.Palette) -> None:
    ax.plot(curve.x, curve.y, color=palette.batch_colors[int(curve.name)], marker="o", label=curve.name, zorder=3)


def _at_lengths_mask(rows: pd.DataFrame, pair: Tuple[int, int]) -> pd.Series:
    return (rows[R.input_length] == pair[0]) & (rows[R.output_length] == pair[1])


def _at_lengths(rows: pd.DataFrame, pair: Tuple[int, int]) -> pd.DataFrame:
    return rows[_at_lengths_mask(rows, pair)]


ALL_CHARTS = (latency_vs_throughput, latency_vs_output_length, ttft_vs_input_length, tpot_vs_batch_size,
              throughput_vs_batch_size)


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """Every batch chart, in the order the report shows them; none when no batch point ended ok."""
    return scenario_jobs(ctx, BATCH, ALL_CHARTS)

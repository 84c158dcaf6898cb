"""The headline chart: output tokens/s per GPU against output tokens/s per user, a curve per series through its
loads, the frontier over every series, and the SLO's per-user speed (plots/headline.py holds the data).

More batching buys throughput per GPU and costs each user speed; the frontier is the best a GPU does at each speed,
whichever engine or setting gets it there. Per GPU, a TP-8 entry and a TP-1 entry compare directly.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd
from matplotlib.axes import Axes

from harness.measure.columns.names import R
from plots import headline, style
from plots.charts import (
    Chart,
    ChartContext,
    ChartJob,
    decorate,
    finish,
    legend_right,
    model_and_dtype,
    scenario_jobs,
)
from plots.data import SERIES
from plots.labels import PointLabel, place_point_labels
from plots.load import BATCH, STREAM

SECTION = "Throughput per GPU vs speed per user"


def per_gpu_vs_per_user(ctx: ChartContext) -> List[Chart]:
    """One chart per (scenario, input length, output length) of the context's rows."""
    rows = headline.points(ctx.ok)
    return [_one(ctx, rows, group, ctx.slo_tpot_ms) for group in headline.length_groups(rows)]


def _one(ctx: ChartContext, rows: pd.DataFrame, group: Tuple[str, int, int], slo_tpot_ms: Optional[float]) -> Chart:
    scenario, input_length, output_length = group
    mask = (rows[R.scenario] == scenario) & (rows[R.input_length] == input_length) & (
        rows[R.output_length] == output_length)
    here = rows[mask]
    fig, ax = style.new_figure()
    labels = []
    for name, curve in here.groupby(SERIES, sort=False):
        curve = curve.sort_values(R.batch_size if scenario == BATCH else R.request_rate, kind="stable")
        color = ctx.palette.series_colors[name]
        ax.plot(curve[headline.PER_USER], curve[headline.PER_GPU], color=color,
                marker=ctx.palette.series_markers[name], label=name, zorder=3)
        labels += [PointLabel(x, y, headline.point_label(row), color)
                   for x, y, (_, row) in zip(curve[headline.PER_USER], curve[headline.PER_GPU], curve.iterrows())]
    _draw_frontier(ax, here)
    slo = headline.slo_per_user(here, slo_tpot_ms)
    if slo is not None:
        ax.axvline(slo[1], color="0.35", linestyle="--", linewidth=1.2, zorder=2,
                   label=f"SLO: TPOT {slo[0]:g} ms ({slo[1]:.3g} tokens/s)")
    style.set_value_axis(ax, "x", here[headline.PER_USER])
    style.set_value_axis(ax, "y", here[headline.PER_GPU])
    ax.margins(0.08)
    what = "streams" if scenario == STREAM else "batches"
    title = (f"{model_and_dtype(here)}: throughput per GPU vs speed per user, {what}, "
             f"input {input_length} / output {output_length}")
    decorate(ax, title, headline.X_LABEL, headline.Y_LABEL)
    note = "numbers at points: batch size" if scenario == BATCH else "at points: request rate, c: concurrency cap"
    legend_right(ax, "series", note=note)
    place_point_labels(ax, labels)
    left_out = (ctx.table[R.input_length] == input_length) & (ctx.table[R.output_length] == output_length)
    caption = ctx.dropped_caption(left_out)
    stem = f"per_gpu_vs_per_user_{scenario}_in{input_length}_out{output_length}"
    return finish(ctx, fig, stem, SECTION, title, caption)


def _draw_frontier(ax: Axes, rows: pd.DataFrame) -> None:
    """The frontier over every series as a wide translucent band, as on the latency-throughput chart."""
    front = headline.frontier(rows)
    ax.plot(front[headline.PER_USER], front[headline.PER_GPU], color="0.55", linewidth=9, alpha=0.28,
            solid_capstyle="round", zorder=1, label="frontier (all series)")


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """The headline chart of the batch points, then of the stream points; none for a scenario with no ok point."""
    return scenario_jobs(ctx, BATCH, (per_gpu_vs_per_user,)) + scenario_jobs(ctx, STREAM, (per_gpu_vs_per_user,))

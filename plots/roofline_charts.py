"""What the numbers mean: a roofline chart per series (each point's prefill and decode step at their arithmetic
intensity against the achieved FLOP/s, under the bandwidth and compute roofs of its hardware_peaks), and MBU vs batch
size (docs/measurement.md, "What the numbers mean")."""

from __future__ import annotations

from typing import List

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from harness.measure.columns.names import R
from plots import data, style
from plots.charts import (
    Chart,
    ChartContext,
    ChartJob,
    GridChart,
    decorate,
    finish,
    model_and_dtype,
    scenario_jobs,
    series_grid,
)
from plots.labels import PointLabel, place_point_labels
from plots.load import BATCH

PHASES = (("prefill", R.prefill_flops, R.prefill_bytes, R.ttft_ms_mean, "s"),
          ("decode step", R.decode_flops_per_step, R.decode_bytes_per_step, R.tpot_ms_mean, "o"))


def _explained(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows that carry roofline figures (results from before them, streams and speculative entries do not)."""
    if R.peak_tflops not in rows.columns:
        return rows.iloc[0:0]
    return rows.dropna(subset=[R.peak_tflops, R.peak_memory_bandwidth_gbps, R.prefill_flops])


def roofline(ctx: ChartContext) -> List[Chart]:
    rows = _explained(ctx.ok)
    return [_roofline_one(ctx, series, rows[rows[data.SERIES] == series]) for series in data.series_order(rows)]


def _roofline_one(ctx: ChartContext, series: str, rows: pd.DataFrame) -> Chart:
    fig, ax = style.new_figure()
    color = ctx.palette.series_colors[series]
    bandwidth, peak = rows[R.peak_memory_bandwidth_gbps].iloc[0] * 1e9, rows[R.peak_tflops].iloc[0] * 1e12
    labels, intensities = [], []
    for name, flops, moved, ms, marker in PHASES:
        part = rows.dropna(subset=[flops, moved, ms])
        intensity = part[flops] / part[moved]
        achieved = part[flops] / (part[ms] / 1e3)
        ax.scatter(intensity, achieved, marker=marker, color=color, zorder=3, label=name,
                   facecolors="none" if marker == "s" else color)
        labels += [PointLabel(x, y, f"{b}", color) for x, y, b in zip(intensity, achieved, part[R.batch_size])]
        intensities += list(intensity)
    low, high = min(intensities) / 4, max(max(intensities) * 4, peak / bandwidth * 4)
    x = np.geomspace(low, high, 200)
    ax.plot(x, np.minimum(bandwidth * x, peak), color="0.35", linewidth=1.5, zorder=2,
            label=f"roofs: {bandwidth / 1e9:,.0f} GB/s, {peak / 1e12:,.3g} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    title = f"{model_and_dtype(rows)}: roofline of {series}"
    decorate(ax, title, "arithmetic intensity (FLOPs per byte)", "achieved FLOP/s")
    ax.legend(handles=[Line2D([], [], marker="s", color=color, markerfacecolor="none", linestyle="none"),
                       Line2D([], [], marker="o", color=color, linestyle="none"),
                       Line2D([], [], color="0.35")],
              labels=["prefill (FLOPs / TTFT)", "decode step (FLOPs / TPOT)", ax.get_legend_handles_labels()[1][-1]],
              title="numbers at points: batch size", loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    place_point_labels(ax, labels)
    caption = ("Peaks: " + str(rows[R.hardware].iloc[0]) + ", from manifest.json's hardware_peaks (datasheet on a GPU, "
               "measured on a CPU). Left of the ridge a phase is bound by memory bandwidth, right of it by compute; "
               "the gap below the roof is what the engine leaves unused.")
    return finish(ctx, fig, f"roofline_{ctx.slugs[series]}", "Roofline", title, caption)


def mbu_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    rows = _explained(ctx.ok).dropna(subset=[R.mbu])
    if rows.empty:
        return []
    grid = GridChart(R.mbu, "MBU (decode bandwidth / peak)", "decode memory-bandwidth utilization (MBU) vs batch size",
                     "mbu_vs_batch_size", reference_y=1.0, reference_label="peak bandwidth")
    return [series_grid(ctx, rows, grid, caption_mask=ctx.table[R.status].notna())]


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    if _explained(ctx.table).empty:
        return []
    return scenario_jobs(ctx, BATCH, (roofline, mbu_vs_batch_size))

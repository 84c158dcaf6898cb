"""The five batch charts (stream_charts.py draws the stream ones). Each function draws one kind of chart for every slice it applies to and returns
what it wrote as `Chart` records, which the report embeds in order.

Every chart reads the `ok` rows only; the rows that were left out (oom, skipped, error) are named
in the chart's caption so a missing point is never silent.
"""

from __future__ import annotations

import multiprocessing
import os
import textwrap
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from plots import data, style
from plots.data import SERIES, Curve
from plots.labels import PointLabel, place_point_labels
from plots.load import BATCH

CAPTION_MAX_ITEMS = 24
CAPTION_FONTSIZE = 9.5


@dataclass
class Chart:
    """One written chart: the report section it belongs to, a one-line title, its files and caption."""

    section: str
    title: str
    paths: List[Path]
    caption: str = ""


@dataclass
class ChartContext:
    """What every chart of one report shares: all rows (with series), colours, where and how to save."""

    table: pd.DataFrame
    palette: style.Palette
    out_dir: Path
    formats: Tuple[str, ...]
    requests: Optional[pd.DataFrame] = None  # requests.csv rows (stream points), None when there are none
    ok: pd.DataFrame = field(init=False)
    slugs: Dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.ok = data.plotted(self.table)
        self.slugs = unique_slugs(data.series_order(self.table))

    def scenario(self, scenario: str) -> "ChartContext":
        """The same context over the batch rows or the stream rows only; file names stay those of all rows."""
        part = replace(self, table=data.of_scenario(self.table, scenario))
        part.slugs = self.slugs
        return part

    def dropped_caption(self, mask: pd.Series, with_lengths: bool = False) -> str:
        several_series = self.table[SERIES].nunique() > 1
        items = data.describe_dropped(data.dropped(self.table[mask]), with_lengths, several_series)
        if not items:
            return ""
        shown = items[:CAPTION_MAX_ITEMS]
        more = f"; and {len(items) - len(shown)} more (see report.md)" if len(items) > len(shown) else ""
        return "Left out (status not ok): " + "; ".join(shown) + more


def model_and_dtype(rows: pd.DataFrame) -> str:
    """The title's head: model and dtype, and the prompts when they are not random token ids."""
    return f"{data.unique_text(rows, 'model')} ({data.unique_text(rows, 'dtype')})" + data.prompts_text(rows)


def tokens(count: int) -> str:
    return f"{count} token" if count == 1 else f"{count} tokens"


def slug(text: str) -> str:
    cleaned = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(part for part in cleaned.split("-") if part)[:60]


def unique_slugs(names: Sequence[str]) -> Dict[str, str]:
    """A file-name part per series; numbered when two labels differ only in punctuation or past 60 chars."""
    slugs: Dict[str, str] = {}
    for name in names:
        base = candidate = slug(name) or "series"
        n = 2
        while candidate in slugs.values():
            candidate, n = f"{base}-{n}", n + 1
        slugs[name] = candidate
    return slugs


# -- 1. latency vs throughput -------------------------------------------------------------------------

def latency_vs_throughput(ctx: ChartContext) -> List[Chart]:
    """One chart per (input, output) length pair: a curve per series through its batch sizes."""
    return [_latency_vs_throughput_one(ctx, pair) for pair in data.length_pairs(ctx.ok)]


def _latency_vs_throughput_one(ctx: ChartContext, pair: Tuple[int, int]) -> Chart:
    input_length, output_length = pair
    rows = _at_lengths(ctx.ok, pair)
    fig, ax = style.new_figure()
    curves = data.build_curves(rows, "latency_ms_mean", "throughput_tokens_per_s", order_by="batch_size")
    for curve in curves:
        _draw_series_curve(ax, curve, ctx.palette)
    _draw_pareto(ax, rows)
    style.set_value_axis(ax, "x", rows["latency_ms_mean"])
    style.set_value_axis(ax, "y", rows["throughput_tokens_per_s"])
    ax.margins(0.08)
    title = (f"{model_and_dtype(rows)}: latency vs throughput, "
             f"input {input_length} / output {tokens(output_length)}")
    _decorate(ax, title, "latency per batch, mean (ms)", "output throughput (tokens/s)")
    _legend_right(ax, "series", note="numbers at points: batch size")
    place_point_labels(ax, [PointLabel(x, y, str(b), ctx.palette.series_colors[c.name])
                            for c in curves for x, y, b in zip(c.x, c.y, c.batch_sizes)])
    caption = ctx.dropped_caption(_at_lengths_mask(ctx.table, pair))
    stem = f"latency_vs_throughput_in{input_length}_out{output_length}"
    return _finish(ctx, fig, stem, "Latency vs throughput", title, caption)


def _draw_pareto(ax: Axes, rows: pd.DataFrame) -> None:
    """A wide translucent band through the frontier points: it highlights them without hiding markers."""
    latency = rows["latency_ms_mean"].to_numpy(float)
    rate = rows["throughput_tokens_per_s"].to_numpy(float)
    front = data.pareto_frontier(latency, rate)
    ax.plot(latency[front], rate[front], color="0.55", linewidth=9, alpha=0.28, solid_capstyle="round",
            zorder=1, label="Pareto frontier")


# -- 2. latency vs output length ----------------------------------------------------------------------

def latency_vs_output_length(ctx: ChartContext) -> List[Chart]:
    """Log-log, one line per batch size; one chart per (series, input length)."""
    charts = []
    for series in data.series_order(ctx.ok):
        for input_length in sorted(ctx.ok.loc[ctx.ok[SERIES] == series, "input_length"].unique()):
            charts.append(_latency_vs_output_one(ctx, series, int(input_length)))
    return charts


def _latency_vs_output_one(ctx: ChartContext, series: str, input_length: int) -> Chart:
    rows = ctx.ok[(ctx.ok[SERIES] == series) & (ctx.ok["input_length"] == input_length)]
    fig, ax = style.new_figure()
    for curve in data.build_curves(rows, "output_length", "latency_ms_mean", by="batch_size"):
        _draw_batch_curve(ax, curve, ctx.palette)
    style.set_size_axis(ax, "x", rows["output_length"])
    style.set_value_axis(ax, "y", rows["latency_ms_mean"], force_log=True)
    title = f"{model_and_dtype(rows)}: latency vs output length, input {tokens(input_length)}\n{series}"
    _decorate(ax, title, "output length (tokens)", "latency per batch, mean (ms)")
    _legend_right(ax, "batch size")
    mask = (ctx.table[SERIES] == series) & (ctx.table["input_length"] == input_length)
    caption = ctx.dropped_caption(mask, with_lengths=True)
    stem = f"latency_vs_output_length_{ctx.slugs[series]}_in{input_length}"
    return _finish(ctx, fig, stem, "Latency vs output length", title.replace("\n", ", "), caption)


# -- 3. TTFT vs input length --------------------------------------------------------------------------

def ttft_vs_input_length(ctx: ChartContext) -> List[Chart]:
    """One line per batch size, one chart per series."""
    return [_ttft_one(ctx, series) for series in data.series_order(ctx.ok)]


def _ttft_one(ctx: ChartContext, series: str) -> Chart:
    rows = ctx.ok[ctx.ok[SERIES] == series]
    medians = data.median_over_output_lengths(rows, "ttft_ms_mean")
    fig, ax = style.new_figure()
    for curve in data.build_curves(medians, "input_length", "ttft_ms_mean", by="batch_size"):
        _draw_batch_curve(ax, curve, ctx.palette)
    style.set_size_axis(ax, "x", rows["input_length"])
    style.set_value_axis(ax, "y", medians["ttft_ms_mean"])
    outputs = ", ".join(str(o) for o in sorted(rows["output_length"].unique()))
    title = f"{model_and_dtype(rows)}: time to first token vs input length\n{series}"
    _decorate(ax, title, "input length (tokens)", f"TTFT, mean (ms)\nmedian over output lengths {outputs}")
    _legend_right(ax, "batch size")
    caption = ctx.dropped_caption(ctx.table[SERIES] == series, with_lengths=True)
    return _finish(ctx, fig, f"ttft_vs_input_length_{ctx.slugs[series]}", "Time to first token vs input length",
                   title.replace("\n", ", "), caption)


# -- 4 and 5. per-batch-size grids ----------------------------------------------------------------------

def tpot_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    """Decode ms per output token; output length 1 has no decode step, so it gets no panel."""
    rows = ctx.ok[ctx.ok["output_length"] > 1].dropna(subset=["tpot_ms_mean"])
    if rows.empty:
        return []
    grid = GridChart("tpot_ms_mean", "TPOT, mean (ms per token)",
                     "decode time per output token (TPOT) vs batch size", "tpot_vs_batch_size")
    return [series_grid(ctx, rows, grid, caption_mask=ctx.table["output_length"] > 1)]


def throughput_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    grid = GridChart("throughput_tokens_per_s", "output throughput (tokens/s)", "output throughput vs batch size",
                     "throughput_vs_batch_size")
    return [series_grid(ctx, ctx.ok, grid, caption_mask=ctx.table["status"].notna())]


@dataclass(frozen=True)
class GridChart:
    y_column: str
    y_label: str
    what: str
    stem: str
    reference_y: Optional[float] = None  # a dashed level drawn in every panel (a speed-up of 1: break-even)
    reference_label: str = ""


def series_grid(ctx: ChartContext, rows: pd.DataFrame, grid: GridChart, caption_mask: pd.Series,
                note: str = "") -> Chart:
    """A panel per (input, output) length pair, inputs down and outputs across, a line per series; `note` opens the
    caption."""
    inputs = sorted(int(i) for i in rows["input_length"].unique())
    outputs = sorted(int(o) for o in rows["output_length"].unique())
    fig, axes = style.new_grid(len(inputs), len(outputs))
    for (r, input_length), (c, output_length) in ((a, b) for a in enumerate(inputs) for b in enumerate(outputs)):
        panel = rows[(rows["input_length"] == input_length) & (rows["output_length"] == output_length)]
        _grid_panel(axes[r, c], panel, grid.y_column, ctx.palette, f"input {input_length} / output {output_length}")
        if grid.reference_y is not None and not panel.empty:
            axes[r, c].axhline(grid.reference_y, color="0.45", linestyle="--", linewidth=1, zorder=1)
    for ax in axes[-1, :]:
        ax.set_xlabel("batch size")
    for ax in axes[:, 0]:
        ax.set_ylabel(grid.y_label)
    title = f"{model_and_dtype(rows)}: {grid.what}"
    fig.subplots_adjust(hspace=0.42, wspace=0.26, top=1.0 - 0.95 / fig.get_figheight())
    # Left-aligned like the single charts' titles; free to run on over the legend column.
    fig.suptitle(title, x=axes[0, 0].get_position().x0, y=1.0 - 0.35 / fig.get_figheight(), ha="left",
                 fontweight="bold")
    _grid_legend(fig, axes, ctx.palette, data.series_order(rows), grid.reference_label)
    caption = " ".join(part for part in (note, ctx.dropped_caption(caption_mask, with_lengths=True)) if part)
    return _finish(ctx, fig, grid.stem, grid.what[0].upper() + grid.what[1:], title, caption)


def _grid_panel(ax: Axes, panel: pd.DataFrame, y_column: str, palette: style.Palette, title: str) -> None:
    ax.set_title(title, fontsize=11)
    if panel.empty:
        ax.text(0.5, 0.5, "no ok points", ha="center", va="center", transform=ax.transAxes, color="0.4")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for curve in data.build_curves(panel, "batch_size", y_column):
        _draw_series_curve(ax, curve, palette)
    style.set_size_axis(ax, "x", panel["batch_size"])
    style.set_value_axis(ax, "y", panel[y_column])
    ax.margins(x=0.06, y=0.1)


def _grid_legend(fig: Figure, axes: np.ndarray, palette: style.Palette, series: Sequence[str],
                 reference_label: str = "") -> None:
    handles = [Line2D([], [], color=palette.series_colors[s], marker=palette.series_markers[s]) for s in series]
    labels = list(series)
    if reference_label:
        handles.append(Line2D([], [], color="0.45", linestyle="--", linewidth=1))
        labels.append(reference_label)
    top_right = axes[0, -1].get_position()
    fig.legend(handles, labels, title="series", loc="upper left", frameon=False,
               bbox_to_anchor=(top_right.x1 + 0.015, top_right.y1))


# -- shared drawing -------------------------------------------------------------------------------------

def _draw_series_curve(ax: Axes, curve: Curve, palette: style.Palette) -> None:
    ax.plot(curve.x, curve.y, color=palette.series_colors[curve.name], marker=palette.series_markers[curve.name],
            label=curve.name, zorder=3)


def _draw_batch_curve(ax: Axes, curve: Curve, palette: style.Palette) -> None:
    ax.plot(curve.x, curve.y, color=palette.batch_colors[int(curve.name)], marker="o", label=curve.name, zorder=3)


def _at_lengths_mask(rows: pd.DataFrame, pair: Tuple[int, int]) -> pd.Series:
    return (rows["input_length"] == pair[0]) & (rows["output_length"] == pair[1])


def _at_lengths(rows: pd.DataFrame, pair: Tuple[int, int]) -> pd.DataFrame:
    return rows[_at_lengths_mask(rows, pair)]


def _decorate(ax: Axes, title: str, x_label: str, y_label: str) -> None:
    ax.set_title(title, fontweight="bold", loc="left")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)


def _legend_right(ax: Axes, title: str, note: str = "") -> None:
    handles, labels = ax.get_legend_handles_labels()
    if note:  # a text-only entry: the legend is where readers look for what the marks mean
        handles, labels = handles + [Line2D([], [], linestyle="none")], labels + [note]
    ax.legend(handles, labels, title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
              alignment="left")


def _add_caption(fig: Figure, text: str) -> None:
    """Caption under everything drawn so far; the tight bounding box at save time keeps it in frame."""
    fig.draw_without_rendering()
    bottom_in = fig.get_tightbbox(fig.canvas.get_renderer()).y0
    width_chars = int(fig.get_figwidth() * 14)
    wrapped = textwrap.fill(text, width=width_chars)
    left = min(ax.get_position().x0 for ax in fig.axes)
    fig.text(left, (bottom_in - 0.12) / fig.get_figheight(), wrapped, ha="left", va="top",
             fontsize=CAPTION_FONTSIZE, color="0.25")


def _finish(ctx: ChartContext, fig: Figure, stem: str, section: str, title: str, caption: str) -> Chart:
    if caption:
        _add_caption(fig, caption)
    return Chart(section, title, style.save(fig, ctx.out_dir, stem, ctx.formats), caption)


ALL_CHARTS = (latency_vs_throughput, latency_vs_output_length, ttft_vs_input_length, tpot_vs_batch_size,
              throughput_vs_batch_size)


# One chart function over the rows of one scenario: it draws one chart or several (per series, per length pair).
ChartJob = Tuple[str, Callable[[ChartContext], List[Chart]]]


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """Every batch chart, in the order the report shows them; none when no batch point ended ok."""
    return scenario_jobs(ctx, BATCH, ALL_CHARTS)


def scenario_jobs(ctx: ChartContext, scenario: str, charts) -> List[ChartJob]:
    """`charts` over the rows of one scenario (batch or stream), in order; none when none of them ended ok."""
    return [] if ctx.scenario(scenario).ok.empty else [(scenario, draw) for draw in charts]


def render_jobs(ctx: ChartContext, jobs: List[ChartJob]) -> List[Chart]:
    """Draw every job, their charts in job order. Drawing is CPU-bound matplotlib work, most of it in savefig: jobs
    run in forked processes, one per core (up to MAX_DRAWING_PROCESSES), which share the context by the fork."""
    global _FORKED
    workers = min(len(jobs), len(os.sched_getaffinity(0)), MAX_DRAWING_PROCESSES)
    if workers <= 1:
        return [chart for i in range(len(jobs)) for chart in _draw(ctx, jobs, i)]
    _FORKED = (ctx, jobs)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            drawn = list(pool.map(_draw_forked, range(len(jobs))))
    finally:
        _FORKED = None
    return [chart for charts in drawn for chart in charts]


MAX_DRAWING_PROCESSES = 4
_FORKED: Optional[Tuple[ChartContext, List[ChartJob]]] = None  # what a forked drawing process reads


def _draw_forked(index: int) -> List[Chart]:
    return _draw(*_FORKED, index)


def _draw(ctx: ChartContext, jobs: List[ChartJob], index: int) -> List[Chart]:
    scenario, draw = jobs[index]
    # Fonts are read when each text is created, not when the figure is: keep the style on throughout.
    with mpl.rc_context(style.RC):
        return draw(ctx.scenario(scenario))

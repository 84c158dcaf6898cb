"""What every chart module shares: the `Chart` record the report embeds, the `ChartContext` of one report, the
per-length-pair grid of panels, titles, legends, captions and saving, and drawing the charts in forked processes.

The charts themselves are in batch_charts.py, stream/charts.py, speculative/charts.py and roofline_charts.py; keeping
what they share here lets each of them import it without importing another kind of chart.
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

from harness.measure.columns.names import R
from plots import data, style
from plots.data import SERIES, Curve

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
    slo_tpot_ms: Optional[float] = None  # `--slo-tpot-ms`: the headline chart's SLO line (else a stream's own)
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
    return f"{data.unique_text(rows, R.model)} ({data.unique_text(rows, R.dtype)})" + data.prompts_text(rows)


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


# -- the per-length-pair grid (batch, speculative and roofline charts draw on it) ----------------------

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
    inputs = sorted(int(i) for i in rows[R.input_length].unique())
    outputs = sorted(int(o) for o in rows[R.output_length].unique())
    fig, axes = style.new_grid(len(inputs), len(outputs))
    for (r, input_length), (c, output_length) in ((a, b) for a in enumerate(inputs) for b in enumerate(outputs)):
        panel = rows[(rows[R.input_length] == input_length) & (rows[R.output_length] == output_length)]
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
    return finish(ctx, fig, grid.stem, grid.what[0].upper() + grid.what[1:], title, caption)


def _grid_panel(ax: Axes, panel: pd.DataFrame, y_column: str, palette: style.Palette, title: str) -> None:
    ax.set_title(title, fontsize=11)
    if panel.empty:
        ax.text(0.5, 0.5, "no ok points", ha="center", va="center", transform=ax.transAxes, color="0.4")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for curve in data.build_curves(panel, R.batch_size, y_column):
        draw_series_curve(ax, curve, palette)
    style.set_size_axis(ax, "x", panel[R.batch_size])
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

def draw_series_curve(ax: Axes, curve: Curve, palette: style.Palette) -> None:
    ax.plot(curve.x, curve.y, color=palette.series_colors[curve.name], marker=palette.series_markers[curve.name],
            label=curve.name, zorder=3)


def decorate(ax: Axes, title: str, x_label: str, y_label: str) -> None:
    ax.set_title(title, fontweight="bold", loc="left")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)


def legend_right(ax: Axes, title: str, note: str = "") -> None:
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


def finish(ctx: ChartContext, fig: Figure, stem: str, section: str, title: str, caption: str) -> Chart:
    if caption:
        _add_caption(fig, caption)
    return Chart(section, title, style.save(fig, ctx.out_dir, stem, ctx.formats), caption)


# One chart function over the rows of one scenario: it draws one chart or several (per series, per length pair).
ChartJob = Tuple[str, Callable[[ChartContext], List[Chart]]]


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

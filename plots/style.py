"""How every chart looks: fonts, one colour and marker per series, batch-size colours, axis scales, and the
line styles that tell a p50 (solid) from a p99 (dashed).

Colours are fixed once per report (`Palette`), so a series is the same colour in every chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import matplotlib as mpl
import numpy as np
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# A decade is where a linear axis starts squashing the small values into one corner.
LOG_SCALE_MIN_RATIO = 10.0
# Offered request rates get a log2 axis past this span (1, 2, 4 stays linear; 1 to 8 does not).
RATE_LOG2_MIN_RATIO = 4.0
PERCENTILE_STYLES = {"p50": "-", "p99": "--"}
DPI = 150
SINGLE_FIGSIZE_IN = (8.0, 5.2)
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
RC = {
    "font.size": 11, "axes.titlesize": 12.5, "axes.labelsize": 11.5, "legend.fontsize": 10,
    "xtick.labelsize": 10, "ytick.labelsize": 10, "figure.titlesize": 14, "axes.grid": True,
    "grid.alpha": 0.3, "grid.linewidth": 0.6, "axes.spines.top": False, "axes.spines.right": False,
    "lines.linewidth": 1.8, "lines.markersize": 6.5, "savefig.dpi": DPI, "figure.dpi": DPI,
}


@dataclass
class Palette:
    """Series colours and markers (tab10, in order of first appearance) and batch-size colours."""

    series_colors: Dict[str, Tuple[float, ...]] = field(default_factory=dict)
    series_markers: Dict[str, str] = field(default_factory=dict)
    batch_colors: Dict[int, Tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, series: Sequence[str], batch_sizes: Sequence[int] = ()) -> "Palette":
        """`batch_sizes` may be empty (stream results only): then there are no batch-size colours."""
        tab = mpl.colormaps["tab10" if len(series) <= 10 else "tab20"]
        colors = {s: tab(i % tab.N) for i, s in enumerate(series)}
        markers = {s: SERIES_MARKERS[i % len(SERIES_MARKERS)] for i, s in enumerate(series)}
        return cls(colors, markers, batch_size_colors(batch_sizes))


def batch_size_colors(batch_sizes: Sequence[int]) -> Dict[int, Tuple[float, ...]]:
    """A sequential colour per batch size, small = dark; viridis' pale yellow end is cut off for contrast."""
    ordered = sorted(set(int(b) for b in batch_sizes))
    if not ordered:
        return {}
    cmap = mpl.colormaps["viridis"]
    positions = np.linspace(0.0, 0.85, len(ordered)) if len(ordered) > 1 else [0.35]
    return {b: cmap(p) for b, p in zip(ordered, positions)}


def new_figure(figsize_in: Tuple[float, float] = SINGLE_FIGSIZE_IN) -> Tuple[Figure, Axes]:
    fig = _agg_figure(figsize_in)
    return fig, fig.subplots()


def new_grid(rows: int, cols: int) -> Tuple[Figure, np.ndarray]:
    fig = _agg_figure((max(4.6 * cols, 7.0), 3.7 * rows + 0.9))
    return fig, fig.subplots(rows, cols, squeeze=False)


def _agg_figure(figsize_in: Tuple[float, float]) -> Figure:
    # A bare Figure on the Agg canvas, not pyplot: no display needed, no global figure registry to
    # leak into, and no switching the backend of a program (or notebook) that imports us.
    fig = Figure(figsize=figsize_in)
    FigureCanvasAgg(fig)
    return fig


def spans_decades(values: Sequence[float]) -> bool:
    positive = np.asarray([v for v in values if np.isfinite(v) and v > 0], dtype=float)
    return positive.size > 1 and positive.max() / positive.min() >= LOG_SCALE_MIN_RATIO


def human_number(value: float, _pos: object = None) -> str:
    """Tick text: 20, 500, 1.5k, 20k, 3M; never 10^3, which readers of a design doc misread."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def set_value_axis(ax: Axes, which: str, values: Sequence[float], force_log: bool = False) -> None:
    """Log scale on axis `which` ("x"/"y") when the values span a decade or more; plain-number ticks."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if force_log or spans_decades(values):
        getattr(ax, f"set_{which}scale")("log")
        axis.set_major_locator(ticker.LogLocator(base=10, subs=_log_subs(values)))
        axis.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(1, 10)))
        axis.set_minor_formatter(ticker.NullFormatter())
        axis.set_major_formatter(ticker.FuncFormatter(human_number))
    else:
        set_linear_axis(ax, which)


def set_linear_axis(ax: Axes, which: str) -> None:
    """A linear axis with round steps (500, 1k, 1.5k reads better than 1.25k, 1.75k) and plain-number ticks."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(ticker.MaxNLocator(nbins=7, steps=[1, 2, 5, 10]))
    axis.set_major_formatter(ticker.FuncFormatter(human_number))


def _log_subs(values: Sequence[float]) -> Tuple[float, ...]:
    # Over one or two decades 1-2-5 leaves the top or bottom of the axis without a number.
    positive = [v for v in values if np.isfinite(v) and v > 0]
    decades = np.log10(max(positive) / min(positive)) if positive else 0.0
    return (1.0, 2.0, 5.0) if decades > 2 else (1.0, 2.0, 3.0, 5.0)


def set_size_axis(ax: Axes, which: str, sizes: Sequence[int]) -> None:
    """Batch sizes and lengths are powers of two: log2 spacing, a tick at each value actually swept."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    ticks = sorted(set(int(s) for s in sizes))
    if len(ticks) > 1 and ticks[-1] / ticks[0] >= 4:
        getattr(ax, f"set_{which}scale")("log", base=2)
    axis.set_major_locator(ticker.FixedLocator(ticks))
    axis.set_major_formatter(ticker.FuncFormatter(human_number))
    axis.set_minor_locator(ticker.NullLocator())


def set_rate_axis(ax: Axes, rates: Sequence[float]) -> None:
    """Offered request rates on x: a tick at each rate swept; log2 when they span more than 4x."""
    ticks = sorted(set(float(r) for r in rates if np.isfinite(r) and r > 0))
    if len(ticks) > 1 and ticks[-1] / ticks[0] > RATE_LOG2_MIN_RATIO:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_number))
    ax.xaxis.set_minor_locator(ticker.NullLocator())


def save(fig: Figure, out_dir: Path, stem: str, formats: Sequence[str]) -> List[Path]:
    """Write the figure once per format; tight bounding box keeps outside legends and captions in frame."""
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        fig.savefig(path, bbox_inches="tight", pad_inches=0.15, facecolor="white")
        paths.append(path)
    return paths

"""report.html's plotly figures beside the headline (headline_figures.py): latency vs throughput per length pair,
TTFT and TPOT vs batch size per length pair, and a stream's TTFT and TPOT vs offered rate per (lengths, cap) group.

Every trace is one series and carries, per point, the row id (`customdata`) and the row's hover text (rows.py);
`meta` says what the trace is ("series", or "frontier" for the headline's), which is how report.js filters it.
Colours and markers are the PNG charts' (style.Palette), so a series looks the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.colors import to_hex
from plotly.subplots import make_subplots

from harness.measure.columns.names import R
from plots import data, style
from plots.charts import model_and_dtype
from plots.data import SERIES
import plots.html.rows as row_data
from plots.load import BATCH, STREAM
from plots.stream import selections

HEIGHT_PX = 440
# matplotlib's marker codes (style.SERIES_MARKERS) in plotly's names.
SYMBOLS = {"o": "circle", "s": "square", "^": "triangle-up", "D": "diamond", "v": "triangle-down", "P": "cross",
           "X": "x", "<": "triangle-left", ">": "triangle-right", "h": "hexagon"}
GRID = "#e6e6e6"


@dataclass
class HtmlFigure:
    """One figure of the page: the section it goes under, its kind (report.js and the tests find charts by it)."""

    section: str
    kind: str
    figure: go.Figure


def floats(values: pd.Series) -> List[float]:
    return [float(v) for v in values]


def series_trace(rows: pd.DataFrame, name: str, x_column: str, y_column: str, palette: style.Palette,
                 labels: Optional[Sequence[str]] = None, showlegend: bool = True) -> Optional[go.Scatter]:
    """One series' points in drawing order, each with its row id, hover text and (optionally) a label."""
    x, y = rows[x_column].astype(float), rows[y_column].astype(float)
    keep = np.isfinite(x) & np.isfinite(y)
    if not keep.any():
        return None
    rows = rows[keep]
    labels = [str(t) for t, k in zip(labels, keep) if k] if labels is not None else [""] * len(rows)
    color = to_hex(palette.series_colors[name])
    return go.Scatter(
        x=floats(x[keep]), y=floats(y[keep]), name=name, legendgroup=name, showlegend=showlegend,
        mode="lines+markers+text" if any(labels) else "lines+markers", text=labels, textposition="top center",
        textfont={"size": 11, "color": color}, hovertext=[row_data.hover_text(r) for _, r in rows.iterrows()],
        hovertemplate="%{hovertext}<extra></extra>", customdata=row_data.row_ids(rows), meta="series",
        marker={"color": color, "size": 8, "symbol": SYMBOLS.get(palette.series_markers[name], "circle")},
        line={"color": color, "width": 2})


def add_series(fig: go.Figure, rows: pd.DataFrame, x_column: str, y_column: str, palette: style.Palette,
               label=None, panel: Optional[int] = None) -> None:
    """A trace per series (first seen first); in a panel of subplots the legend entry is the first panel's only."""
    for name in data.series_order(rows):
        part = rows[rows[SERIES] == name]
        labels = [label(r) for _, r in part.iterrows()] if label else None
        trace = series_trace(part, name, x_column, y_column, palette, labels, showlegend=panel in (None, 1))
        if trace is not None:
            fig.add_trace(trace, **({"row": 1, "col": panel} if panel else {}))


def value_axis(values: pd.Series) -> dict:
    """A log axis where the values span a decade (style.spans_decades), as on the PNG charts, with 1-2-5 ticks in
    plain numbers (plotly's own label the 2 to 9 between powers of ten by their digit alone)."""
    positive = [v for v in floats(values.dropna()) if np.isfinite(v) and v > 0]
    if not style.spans_decades(positive):
        return {}
    low, high = np.floor(np.log10(min(positive))), np.ceil(np.log10(max(positive)))
    ticks = [m * 10.0 ** k for k in range(int(low), int(high) + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if min(positive) / 1.5 <= t <= max(positive) * 1.5]
    return {"type": "log", "tickvals": ticks, "ticktext": [style.human_number(t) for t in ticks]}


def steps_axis(values: pd.Series, log_from: float = 4.0) -> dict:
    """Batch sizes or rates: a tick at each value swept, log spaced past `log_from` x."""
    ticks = sorted(set(v for v in floats(values.dropna()) if np.isfinite(v) and v > 0))
    axis: dict = {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}
    if len(ticks) > 1 and ticks[-1] / ticks[0] >= log_from:
        axis["type"] = "log"
    return axis


def finish_layout(fig: go.Figure, title: str, x_label: str, y_label: str, x_axis: dict, y_axis: dict) -> None:
    """Title, axes and legend; the empty template keeps plotly's default theme out of every figure's JSON."""
    axes = {"gridcolor": GRID, "zerolinecolor": GRID, "linecolor": "#999", "showline": True}
    fig.update_layout(template="none", height=HEIGHT_PX, title={"text": title, "x": 0.01, "font": {"size": 15}},
                      margin={"l": 70, "r": 20, "t": 70, "b": 55}, legend={"title": {"text": "series"}},
                      hoverlabel={"align": "left"}, font={"family": "system-ui, sans-serif", "size": 12})
    fig.update_xaxes(title_text=x_label, **axes, **x_axis)
    fig.update_yaxes(title_text=y_label, **axes, **y_axis)


def at_lengths(rows: pd.DataFrame, input_length: int, output_length: int) -> pd.DataFrame:
    return rows[(rows[R.input_length] == input_length) & (rows[R.output_length] == output_length)]


def lengths_title(input_length: int, output_length: int) -> str:
    return f"input {input_length} / output {output_length} tokens"


# -- batch: latency vs throughput, TTFT and TPOT vs batch size ---------------------------------------------

def batch_figures(table: pd.DataFrame, palette: style.Palette) -> List[HtmlFigure]:
    ok = data.plotted(data.of_scenario(table, BATCH))
    figures = []
    for pair in data.length_pairs(ok) if not ok.empty else []:
        figures.append(latency_vs_throughput(at_lengths(ok, *pair), pair, palette))
    for pair in data.length_pairs(ok) if not ok.empty else []:
        figures.append(ttft_tpot_vs_batch_size(at_lengths(ok, *pair), pair, palette))
    return figures


def latency_vs_throughput(rows: pd.DataFrame, pair, palette: style.Palette) -> HtmlFigure:
    """Every series' points, and the Pareto frontier over all of them as the PNG draws it (a grey band first, under
    the points); report.js redraws the band over the points a filter leaves shown."""
    fig = go.Figure()
    front = rows.iloc[data.pareto_frontier(rows[R.latency_ms_mean], rows[R.throughput_tokens_per_s])]
    fig.add_trace(go.Scatter(
        x=floats(front[R.latency_ms_mean]), y=floats(front[R.throughput_tokens_per_s]), name="Pareto frontier",
        mode="lines", line={"color": "rgba(110, 110, 110, 0.3)", "width": 10}, hoverinfo="skip",
        meta="latency-frontier", legendrank=2000, customdata=row_data.row_ids(front), text=[""] * len(front),
        hovertext=[""] * len(front)))
    add_series(fig, rows, R.latency_ms_mean, R.throughput_tokens_per_s, palette,
               label=lambda r: int(r[R.batch_size]))
    title = f"{model_and_dtype(rows)}: latency vs throughput, {lengths_title(*pair)}"
    finish_layout(fig, title, "latency per batch, mean (ms)", "output throughput (tokens/s)",
                  value_axis(rows[R.latency_ms_mean]), value_axis(rows[R.throughput_tokens_per_s]))
    return HtmlFigure("Latency vs throughput (numbers at points: batch size)", "latency-throughput", fig)


def ttft_tpot_vs_batch_size(rows: pd.DataFrame, pair, palette: style.Palette) -> HtmlFigure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT, mean", "TPOT, mean"), horizontal_spacing=0.1)
    for panel, column in ((1, R.ttft_ms_mean), (2, R.tpot_ms_mean)):
        add_series(fig, rows, R.batch_size, column, palette, panel=panel)
    title = f"{model_and_dtype(rows)}: TTFT and TPOT vs batch size, {lengths_title(*pair)}"
    finish_layout(fig, title, "batch size", "ms", steps_axis(rows[R.batch_size]), {})
    fig.update_yaxes(**value_axis(rows[R.ttft_ms_mean]), row=1, col=1)
    fig.update_yaxes(**value_axis(rows[R.tpot_ms_mean]), row=1, col=2)
    return HtmlFigure("TTFT and TPOT vs batch size", "ttft-tpot-batch", fig)


# -- streams: TTFT and TPOT vs offered rate ------------------------------------------------------------------

def stream_figures(table: pd.DataFrame, palette: style.Palette) -> List[HtmlFigure]:
    """A figure per (lengths, cap) group with points at an offered rate; a burst has no place on a rate axis (its
    numbers are in the tables and the headline)."""
    ok = data.plotted(data.of_scenario(table, STREAM))
    if ok.empty:
        return []
    figures = []
    for group in selections.stream_groups(ok):
        rows = selections.on_rate_axis(group.rows(ok))
        if rows.empty:
            continue
        fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT, p50", "TPOT, p50"), horizontal_spacing=0.1)
        for panel, column in ((1, R.ttft_ms_p50), (2, R.tpot_ms_p50)):
            add_series(fig, rows, R.request_rate, column, palette, panel=panel)
        title = f"{model_and_dtype(rows)}: TTFT and TPOT vs offered rate, {group.text}"
        finish_layout(fig, title, "offered request rate (requests/s)", "ms",
                      steps_axis(rows[R.request_rate], style.RATE_LOG2_MIN_RATIO), {})
        figures.append(HtmlFigure("Stream: TTFT and TPOT vs offered rate", "ttft-tpot-rate", fig))
    return figures

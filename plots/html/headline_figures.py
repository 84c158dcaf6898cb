"""The headline view in report.html: output tokens/s per GPU against per user, a figure per (scenario, input length,
output length) group, a trace per series with each point labelled by its load, the frontier over every series as a
grey band and the SLO's per-user speed as a dashed line. The points, frontier and SLO are plots/headline.py's, the
PNG chart's too, so both show the same. report.js redraws the frontier over the points a filter leaves shown.
"""

from __future__ import annotations

import math
from typing import List, Optional

import pandas as pd
import plotly.graph_objects as go

from harness.measure.columns.names import R
from plots import data, headline, style
from plots.charts import model_and_dtype
import plots.html.rows as row_data
from plots.html.figures import HtmlFigure, add_series, finish_layout, floats, lengths_title, value_axis

SECTION = "Headline: output tokens/s per GPU vs per user (numbers at points: batch size or rate)"
KIND = "headline"
FRONTIER_NAME = "frontier (all series)"  # the PNG's words


def headline_figures(table: pd.DataFrame, palette: style.Palette,
                     slo_tpot_ms: Optional[float] = None) -> List[HtmlFigure]:
    points = headline.points(data.plotted(table))
    figures = []
    for scenario, input_length, output_length in headline.length_groups(points) if not points.empty else []:
        rows = points[(points[R.scenario] == scenario) & (points[R.input_length] == input_length)
                      & (points[R.output_length] == output_length)]
        figure = _figure(rows, scenario, (input_length, output_length), palette, slo_tpot_ms)
        figures.append(HtmlFigure(SECTION, KIND, figure))
    return figures


def _figure(rows: pd.DataFrame, scenario: str, pair, palette: style.Palette,
            slo_tpot_ms: Optional[float]) -> go.Figure:
    fig = go.Figure()
    front = headline.frontier(rows)
    # A wide translucent band under the series (drawn first), as on the PNG: it marks the frontier's points without
    # hiding them; listed last in the legend.
    fig.add_trace(go.Scatter(
        x=floats(front[headline.PER_USER]), y=floats(front[headline.PER_GPU]), name=FRONTIER_NAME, mode="lines",
        line={"color": "rgba(110, 110, 110, 0.3)", "width": 10}, hoverinfo="skip", meta="frontier", legendrank=2000,
        customdata=row_data.row_ids(front), text=[""] * len(front), hovertext=[""] * len(front)))
    add_series(fig, rows, headline.PER_USER, headline.PER_GPU, palette, label=headline.point_label)
    x_axis = value_axis(rows[headline.PER_USER])
    slo = headline.slo_per_user(rows, slo_tpot_ms)
    if slo is not None:
        _slo_line(fig, slo, log=x_axis.get("type") == "log")
    title = f"{model_and_dtype(rows)}: {scenario}, {lengths_title(*pair)}"
    finish_layout(fig, title, headline.X_LABEL, headline.Y_LABEL, x_axis, value_axis(rows[headline.PER_GPU]))
    return fig


def _slo_line(fig: go.Figure, slo, log: bool) -> None:
    """A dashed vertical line at the SLO's per-user speed, named at its top (a note's x on a log axis is the
    exponent, where a line's is the value)."""
    fig.add_vline(x=slo[1], line={"color": "#595959", "dash": "dash", "width": 1.2})
    fig.add_annotation(x=math.log10(slo[1]) if log else slo[1], xref="x", y=1, yref="paper", yanchor="bottom",
                       xanchor="left", showarrow=False, text=f"SLO: TPOT {slo[0]:g} ms ({slo[1]:.3g} tokens/s)",
                       font={"color": "#595959", "size": 11})

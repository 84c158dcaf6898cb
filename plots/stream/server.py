"""The server's own view of a stream, at the highest offered rate: requests queued and running, and KV-cache usage,
over the stream's time, from the series an `openai` entry scraped (results.csv's server_metrics_file). Drawn for
the groups where some entry has them; other entries (in-process engines, servers without metrics) are named.
"""

from __future__ import annotations

from typing import List, Optional

import pandas as pd

from harness.measure.columns.names import M, R
from plots import data, style
from plots.charts import Chart, ChartContext, finish, legend_right, model_and_dtype
from plots.data import SERIES
from plots.stream import selections
from plots.stream.selections import StreamGroup

SECTION = "Stream: the server's queue and KV cache"
SERIES_FILE = R.server_metrics_file


def server_timeline(ctx: ChartContext) -> List[Chart]:
    charts = (_one(ctx, group) for group in selections.stream_groups(ctx.ok))
    return [chart for chart in charts if chart is not None]


def _scraped(rows: pd.DataFrame) -> pd.DataFrame:
    if SERIES_FILE not in rows.columns:
        return rows.iloc[0:0]
    return rows[rows[SERIES_FILE].fillna("").astype(str) != ""]


def _one(ctx: ChartContext, group: StreamGroup) -> Optional[Chart]:
    rows = selections.on_rate_axis(group.rows(ctx.ok))
    scraped = _scraped(rows)
    if scraped.empty:
        return None  # nothing scraped here: no chart, rather than an empty one
    rate = float(scraped[R.request_rate].max())
    at = scraped[scraped[R.request_rate] == rate]
    fig, axes = style.new_grid(1, 2)
    queue_ax, kv_ax = axes[0]
    drawn = []
    for _, row in at.iterrows():
        try:
            series = pd.read_csv(row[SERIES_FILE])
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
            continue
        color, name = ctx.palette.series_colors[row[SERIES]], row[SERIES]
        queue_ax.step(series[M.t_s], series[M.requests_waiting], where="post", color=color, label=f"{name}: waiting")
        queue_ax.step(series[M.t_s], series[M.requests_running], where="post", color=color, linestyle="--",
                      label=f"{name}: running")
        kv_ax.plot(series[M.t_s], series[M.kv_cache_usage] * 100, color=color, label=name)
        drawn.append(name)
    title = f"{model_and_dtype(at)}: the server's own queue and KV cache at {rate:g} requests/s\n{group.text}"
    queue_ax.set_title("requests queued and running", fontsize=11.5)
    queue_ax.set_xlabel("time from the stream's start (s)")
    queue_ax.set_ylabel("requests")
    kv_ax.set_title("KV-cache usage", fontsize=11.5)
    kv_ax.set_xlabel("time from the stream's start (s)")
    kv_ax.set_ylabel("KV cache in use (%)")
    kv_ax.set_ylim(bottom=0)
    fig.subplots_adjust(wspace=0.28, top=1.0 - 1.15 / fig.get_figheight())
    fig.suptitle(title, x=queue_ax.get_position().x0, y=1.0 - 0.2 / fig.get_figheight(), ha="left", va="top",
                 fontweight="bold")
    legend_right(kv_ax, "series")
    queue_ax.legend(frameon=False, fontsize=8.5)
    others = [s for s in data.series_order(rows) if s not in drawn]
    caption = (f"As scraped from each server's metrics endpoint while the stream ran, at the highest offered rate "
               f"({rate:g}/s) with server metrics. Not shown (no server metrics): {', '.join(others)}"
               if others else f"As scraped from each server's metrics endpoint while the stream ran, at {rate:g}/s")
    return finish(ctx, fig, f"stream_server_{group.stem}", SECTION, title.replace("\n", ", "), caption + ".")

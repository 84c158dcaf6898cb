"""Multi-turn conversations: TTFT against the context a request carried (its conversation so far), per engine, at
the highest rate every series of the group ran ok. Each request is a dot; the line joins the medians of equal-count
bins of context length, so the growth of prefill with the history reads across engines. Drawn for the groups whose
requests.csv rows have `context_tokens` (multi-turn streams).
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd

from harness.measure.columns.names import Q
from plots import data, style
from plots.charts import Chart, ChartContext, decorate, finish, legend_right, model_and_dtype
from plots.data import SERIES
from plots.stream import selections
from plots.stream.requests import requests_at
from plots.stream.selections import StreamGroup

SECTION = "Stream: TTFT vs conversation context"
BINS = 6


def ttft_vs_context(ctx: ChartContext) -> List[Chart]:
    charts = (_one(ctx, group) for group in selections.stream_groups(ctx.ok))
    return [chart for chart in charts if chart is not None]


def _one(ctx: ChartContext, group: StreamGroup) -> Optional[Chart]:
    series = data.series_order(group.rows(ctx.ok))
    rate = selections.highest_shared_ok_rate(group.rows(ctx.ok), series)
    if rate is None:
        return None
    requests = requests_at(ctx, group, rate)
    if Q.context_tokens not in requests.columns:
        return None
    requests = requests.assign(**{Q.context_tokens: pd.to_numeric(requests[Q.context_tokens], errors="coerce"),
                                  Q.ttft_ms: pd.to_numeric(requests[Q.ttft_ms], errors="coerce")})
    requests = requests.dropna(subset=[Q.context_tokens, Q.ttft_ms])
    if requests.empty:
        return None  # single-request streams: no conversation to chart
    fig, ax = style.new_figure()
    for name in series:
        mine = requests[requests[SERIES] == name]
        if mine.empty:
            continue
        color = ctx.palette.series_colors[name]
        ax.scatter(mine[Q.context_tokens], mine[Q.ttft_ms], s=14, alpha=0.45, color=color, edgecolors="none")
        x, y = _binned_medians(mine)
        ax.plot(x, y, color=color, marker="o", linewidth=2, label=f"{name} ({len(mine)})")
    load = "a burst" if np.isinf(rate) else f"{rate:g} conversations/s"
    title = f"{model_and_dtype(group.rows(ctx.ok))}: TTFT vs the conversation's context, {load}\n{group.text}"
    decorate(ax, title, "context sent with the request (tokens: history, answers, this turn)",
             "TTFT, from scheduled arrival (ms)")
    ax.set_ylim(bottom=0)
    legend_right(ax, "series (requests)")
    caption = (f"Every turn of every conversation at {load}, the highest rate every series ran ok: a dot per "
               f"request, the line through the medians of {BINS} equal-count bins of context length")
    return finish(ctx, fig, f"stream_turns_{group.stem}", SECTION, title.replace("\n", ", "), caption + ".")


def _binned_medians(requests: pd.DataFrame):
    ordered = requests.sort_values(Q.context_tokens)
    bins = np.array_split(np.arange(len(ordered)), min(BINS, len(ordered)))
    x = [float(ordered[Q.context_tokens].iloc[b].median()) for b in bins if len(b)]
    y = [float(ordered[Q.ttft_ms].iloc[b].median()) for b in bins if len(b)]
    return x, y

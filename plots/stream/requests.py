"""The requests.csv rows behind a group's stream points, for the charts drawn per request."""

from __future__ import annotations

import pandas as pd

from harness.measure.columns.names import Q, R
from plots.charts import ChartContext
from plots.data import SERIES
from plots.load import REQUEST_JOIN_COLUMNS, SOURCE_COLUMN
from plots.stream.selections import StreamGroup


def requests_at(ctx: ChartContext, group: StreamGroup, rate: float) -> pd.DataFrame:
    """The requests.csv rows of the group's ok points at `rate`, with the series of their results row."""
    if ctx.requests is None:
        return pd.DataFrame(columns=[SERIES, Q.ttft_ms])
    points = group.rows(ctx.ok)
    points = points[points[R.request_rate] == rate]
    keys = [SOURCE_COLUMN, *REQUEST_JOIN_COLUMNS]
    requests = ctx.requests[[c for c in ctx.requests.columns if c != SERIES]]
    return requests.merge(points[keys + [SERIES]].drop_duplicates(keys), on=keys, how="inner")

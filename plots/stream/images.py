"""report.md's section on images sent with the text: per series, at the highest offered rate it ran ok, the images
each request carried, their size, the prompt as the server counted it (image tokens included) and the latencies
(docs/measurement.md, "Images with the text"). Read from results.csv; nothing where no request carried an image."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import SERIES, fmt, rate_text
from plots.load import STREAM

HEADER = ("| series | rate | images / request | pixels / image | prompt tokens (server) | TTFT p50 (ms) "
          "| TTFT p99 (ms) | TPOT p50 (ms) | E2E p99 (ms) |")


def image_lines(table: pd.DataFrame) -> List[str]:
    rows = data.of_scenario(data.plotted(table), STREAM)
    if R.images_per_request not in rows.columns:
        return []
    rows = rows[pd.to_numeric(rows[R.images_per_request], errors="coerce").notna()]
    if rows.empty:
        return []
    lines = ["## Images with the text", "", "Each request carried its entry's images with its text; the server counted "
             "the prompt, image tokens included. Per series, at the highest offered rate it ran ok.", "",
             *data.table_head(HEADER, 1)]
    for series in data.series_order(rows):
        own = rows[rows[SERIES] == series]
        top = own.loc[pd.to_numeric(own[R.request_rate], errors="coerce").idxmax()]
        cells = [series, rate_text(top[R.request_rate], "{:g}/s"), f"{float(top[R.images_per_request]):g}",
                 fmt(top[R.image_pixels_mean]), fmt(top[R.input_tokens_mean]), fmt(top[R.ttft_ms_p50]),
                 fmt(top[R.ttft_ms_p99]), fmt(top[R.tpot_ms_p50]), fmt(top[R.e2e_ms_p99])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]

"""report.md's memory sections: the largest batch a `batch_sizes: auto` search found, and how far the memory
estimate that plans and guards every point (harness/model/memory.py) was from what each point used."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import SERIES, fmt

GiB = 1024**3
LARGEST_HEADER = ("| series | input | output | largest batch | throughput (tokens/s) | latency (ms) | TPOT (ms) "
                  "| estimated (GiB) | used (GiB) |")
ESTIMATE_HEADER = "| series | points | estimate / used, median | lowest | highest | at batch size | used there (GiB) |"


def memory_lines(table: pd.DataFrame) -> List[str]:
    """Both sections, each only where it has rows."""
    batch = data.of_scenario(table, data.BATCH)
    ok = batch[batch[R.status] == data.PLOTTED_STATUS].copy()
    if ok.empty:
        return []
    ok["used_bytes"] = used_bytes(ok)
    return largest_batch_lines(ok) + estimate_lines(ok)


def used_bytes(rows: pd.DataFrame) -> pd.Series:
    """What a point added to its counter: its peak minus the reading before the engine loaded (results from before
    that column count the whole peak)."""
    before = rows[R.memory_before_load_bytes] if R.memory_before_load_bytes in rows else 0
    return rows[R.peak_memory_bytes] - pd.Series(before, index=rows.index).fillna(0)


def largest_batch_lines(ok: pd.DataFrame) -> List[str]:
    if R.max_batch not in ok or not (ok[R.max_batch] == "true").any():
        return []
    lines = ["## Largest batch (batch_sizes: auto)", "",
             "The largest batch that ran at each length pair; the batches the search tried are in the charts, and "
             "the ones that did not run are listed below with why.", "", *data.table_head(LARGEST_HEADER, 1)]
    largest = ok[ok[R.max_batch] == "true"]
    for series in data.series_order(largest):
        for _, r in largest[largest[SERIES] == series].sort_values([R.input_length, R.output_length]).iterrows():
            cells = [series, str(r[R.input_length]), str(r[R.output_length]), str(r[R.batch_size]),
                     fmt(r[R.throughput_tokens_per_s]), fmt(r[R.latency_ms_mean]), fmt(r.get(R.tpot_ms_mean)),
                     fmt(r[R.estimated_memory_bytes] / GiB), fmt(r["used_bytes"] / GiB)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def estimate_lines(ok: pd.DataFrame) -> List[str]:
    measured = ok[(ok["used_bytes"] > 0) & ok[R.estimated_memory_bytes].notna()].copy()
    if measured.empty:
        return []
    measured["ratio"] = measured[R.estimated_memory_bytes] / measured["used_bytes"]
    lines = ["## Memory: estimate vs used", "",
             "Used: peak_memory_bytes minus memory_before_load_bytes, what the engine and the point added to the "
             "counter (the GPU allocator's, or on a host the RSS of the worker and its children, whose interpreters "
             "count too). Below 1, the estimate was short: the memory guard let through more than it planned for.",
             "", *data.table_head(ESTIMATE_HEADER, 1)]
    for series in data.series_order(measured):
        rows = measured[measured[SERIES] == series]
        largest = rows.loc[rows[R.batch_size].idxmax()]
        cells = [series, str(len(rows)), fmt(rows["ratio"].median()), fmt(rows["ratio"].min()),
                 fmt(rows["ratio"].max()), str(largest[R.batch_size]), fmt(largest["used_bytes"] / GiB)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]

"""What each result row carries into report.html: an id (its index in the table), the text its point shows on hover,
and the values the page's filters select it by.

A point in a figure and a row in a table share the row's id, so the filters (report.js) hide both together.
"""

from __future__ import annotations

import html
from typing import Dict, List

import pandas as pd

from harness.measure.columns.names import R
from plots import data, headline
from plots.load import BATCH

# The page's filters: a checkbox per value of each, in first-seen order. Lengths are a derived key (`in 128 / out 64`).
LENGTHS = "lengths"
FILTERS = ((R.model, "Model"), (R.backend, "Engine"), (R.hardware, "Hardware"), (LENGTHS, "Lengths"))
# (column, label, unit) of the figures shown on hover where the row has them; status, lengths and load always show.
HOVER_FIGURES = (
    (R.ttft_ms_mean, "TTFT", "ms"), (R.tpot_ms_mean, "TPOT", "ms"),
    (R.throughput_tokens_per_s, "throughput", "tokens/s"), (headline.PER_GPU, "per GPU", "tokens/s"),
    (headline.PER_USER, "per user", "tokens/s"), (R.mbu, "MBU", ""), (R.mfu, "MFU", ""),
    (R.energy_j_per_output_token, "energy", "J/token"), (R.cost_per_million_output_tokens, "cost", "per M tokens"),
    (R.goodput, "within SLO", "requests/s"), (R.slo_attainment, "SLO attainment", ""),
)


def row_ids(rows: pd.DataFrame) -> List[int]:
    return [int(i) for i in rows.index]


def lengths_text(row: pd.Series) -> str:
    return f"in {int(row[R.input_length])} / out {int(row[R.output_length])}"


def load_text(row: pd.Series) -> str:
    """`batch 16`; a stream point's `rate 4/s`, `burst`, with `, cap 8`."""
    if row.get(R.scenario, BATCH) == BATCH:
        return f"batch {int(row[R.batch_size])}" if pd.notna(row[R.batch_size]) else "batch ?"
    return data.load_text(row)


def filter_keys(row: pd.Series) -> Dict[str, str]:
    """The value of each filter for this row."""
    return {key: lengths_text(row) if key == LENGTHS else str(row[key]) for key, _ in FILTERS}


def filter_values(table: pd.DataFrame) -> Dict[str, List[str]]:
    """Every value of each filter in the table, first seen first: the page's checkboxes."""
    values: Dict[str, List[str]] = {key: [] for key, _ in FILTERS}
    for _, row in table.iterrows():
        for key, value in filter_keys(row).items():
            if value not in values[key]:
                values[key].append(value)
    return values


def latency_text(row: pd.Series) -> str:
    """`latency 165 ms ±1.2% (95% CI)` (`*`: it did not converge); a stream point's E2E p50 where it has no mean."""
    if pd.notna(row.get(R.latency_ms_mean)):
        value, _, interval = data.latency_with_ci(row).partition(" ")
        return f"latency {value} ms" + (f" {interval} (95% CI)" if interval else "")
    if pd.notna(row.get(R.e2e_ms_p50)):
        return f"E2E p50 {data.fmt(row[R.e2e_ms_p50])} ms"
    return "latency -"


def hover_text(row: pd.Series) -> str:
    """The point's row, for its hover label: series, the run it came from, status, load and lengths, latency with its
    interval, then every figure of HOVER_FIGURES the row has."""
    lines = [f"<b>{html.escape(str(row[data.SERIES]))}</b>",
             f"run {html.escape(str(row.get(data.SOURCE_COLUMN, '') or '-'))}",
             f"status {html.escape(str(row[R.status]))} · {load_text(row)} · {lengths_text(row)}",
             latency_text(row)]
    figures = [f"{label} {data.fmt(row[column])}{' ' + unit if unit else ''}"
               for column, label, unit in HOVER_FIGURES if column in row and pd.notna(row[column])]
    for start in range(0, len(figures), 3):  # three to a line keeps the label narrow
        lines.append(" · ".join(figures[start:start + 3]))
    return "<br>".join(lines)


def rows_json(table: pd.DataFrame) -> Dict[str, Dict[str, str]]:
    """{row id: its filter values}, embedded in the page for report.js."""
    return {str(i): filter_keys(row) for i, row in table.iterrows()}

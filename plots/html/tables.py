"""report.html's two tables, sortable by any column (report.js) and hidden row by row by the filters: the summary
(per series, scenario and length pair: its peak throughput and the figures there) and every result row, the points
that did not end ok included, with their status and error.

A numeric cell carries its value in `data-v` (empty when there is none), so a column sorts by number, not by text.
"""

from __future__ import annotations

import html
from typing import Iterable, List, Sequence, Tuple

import pandas as pd

from harness.measure.columns.names import R
from plots import data, headline
import plots.html.rows as row_data
from plots.load import BATCH

# (header, column) of the numbers in the table of every row; the mean latency's interval follows the first.
POINT_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("Latency, mean (ms)", R.latency_ms_mean), ("TTFT, mean (ms)", R.ttft_ms_mean), ("TPOT, mean (ms)", R.tpot_ms_mean),
    ("Throughput (tokens/s)", R.throughput_tokens_per_s), ("Per GPU (tokens/s)", headline.PER_GPU),
    ("Per user (tokens/s)", headline.PER_USER), ("MBU", R.mbu), ("Energy (J/token)", R.energy_j_per_output_token),
    ("Cost per M output tokens", R.cost_per_million_output_tokens),
)
# report.md's summary columns (plots/report.py), and the headline's two speeds; LATENCY_CI is the mean latency's 95%
# interval as report.md's `±` gives it.
LATENCY_CI = "latency ±95%"
SUMMARY_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("Peak throughput (tokens/s)", R.throughput_tokens_per_s), ("Latency there (ms)", R.latency_ms_mean),
    ("±95% there", LATENCY_CI), ("TPOT there (ms)", R.tpot_ms_mean), ("Per GPU there", headline.PER_GPU),
    ("Per user there", headline.PER_USER), ("MBU there", R.mbu), ("MFU there", R.mfu),
    ("x roofline there", R.roofline_ratio), ("Cost per M output tokens there", R.cost_per_million_output_tokens),
)
ERROR_CHARS = 120


def text_cell(text: object) -> str:
    return f"<td>{html.escape(str(text))}</td>"


def number_cell(value: object, text: str = "") -> str:
    """The value formatted (data.fmt) or `text`, with the raw number to sort by."""
    number = pd.to_numeric(value, errors="coerce")
    if pd.isna(number):
        return '<td class="n" data-v="">-</td>'
    return f'<td class="n" data-v="{float(number)!r}">{html.escape(text or data.fmt(number))}</td>'


def _count_cell(value: object) -> str:
    """A length or a count: a whole number, as it is in results.csv."""
    number = pd.to_numeric(value, errors="coerce")
    return number_cell(number, "" if pd.isna(number) else str(int(number)))


def table_html(table_id: str, headers: Sequence[str], body: Iterable[str]) -> str:
    head = "".join(f'<th scope="col"><button type="button">{html.escape(h)}</button></th>' for h in headers)
    return (f'<div class="table-wrap"><table id="{table_id}" class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def ci_percent(row: pd.Series) -> object:
    """The mean latency's 95% interval's half-width as a % of it; None without an interval."""
    low, high, mean = row.get(R.latency_ms_ci95_low), row.get(R.latency_ms_ci95_high), row.get(R.latency_ms_mean)
    if low is None or pd.isna(low) or pd.isna(high) or not mean or pd.isna(mean):
        return None
    return (high - low) / 2 / mean * 100


def points_table(table: pd.DataFrame) -> str:
    """Every row, in the report's order (series, lengths, load), ok or not."""
    headers = ["Series", "Status", "Scenario", "Input", "Output", "Load", *[h for h, _ in POINT_COLUMNS[:1]],
               "±95% (%)", *[h for h, _ in POINT_COLUMNS[1:]], "Error"]
    body = []
    for row_id, row in _in_report_order(table).iterrows():
        cells = [text_cell(row[data.SERIES]), text_cell(row[R.status] or "unknown"), text_cell(row[R.scenario]),
                 _count_cell(row[R.input_length]), _count_cell(row[R.output_length]), _load_cell(row),
                 number_cell(row[POINT_COLUMNS[0][1]]), number_cell(ci_percent(row))]
        cells += [number_cell(row.get(column)) for _, column in POINT_COLUMNS[1:]]
        error = str(row.get(R.error) or "").strip()
        error = error.splitlines()[0][:ERROR_CHARS] if error and error != "nan" else ""
        cells.append(f'<td class="error">{html.escape(error)}</td>')
        body.append(f'<tr data-ids="{row_id}">{"".join(cells)}</tr>')
    return table_html("points-table", headers, body)


def _in_report_order(table: pd.DataFrame) -> pd.DataFrame:
    """Series first seen first, then scenario, lengths and load ascending."""
    rank = {name: i for i, name in enumerate(data.series_order(table))}
    keys = [data.SERIES, R.scenario, R.input_length, R.output_length, R.batch_size, R.request_rate]
    return table.sort_values(keys, kind="stable", key=lambda c: c.map(rank) if c.name == data.SERIES else c)


def _load_cell(row: pd.Series) -> str:
    """Sorted by batch size, or by rate (a burst after every rate)."""
    value = row[R.batch_size] if row.get(R.scenario) == BATCH else row.get(R.request_rate)
    number = pd.to_numeric(value, errors="coerce")
    return number_cell(1e300 if number == float("inf") else number, row_data.load_text(row))


def summary_table(table: pd.DataFrame) -> str:
    """Per series, scenario and length pair: how many points ended ok, the peak throughput, where, and the figures
    there (report.md's summary, for streams too)."""
    headers = ["Series", "Scenario", "Input", "Output", "Points ok", "Peak at", *[h for h, _ in SUMMARY_COLUMNS]]
    body = []
    for keys, group in _summary_groups(table):
        series, scenario, input_length, output_length = keys
        ok = group[group[R.status] == data.PLOTTED_STATUS]
        cells = [text_cell(series), text_cell(scenario), _count_cell(input_length), _count_cell(output_length),
                 number_cell(len(ok), f"{len(ok)} of {len(group)}")]
        throughput = ok[R.throughput_tokens_per_s].astype(float)
        if throughput.notna().any():
            peak = ok.loc[throughput.idxmax()]
            cells += [_load_cell(peak), *[_latency_ci_cell(peak) if column == LATENCY_CI else
                                          number_cell(peak.get(column)) for _, column in SUMMARY_COLUMNS]]
        else:
            cells += [text_cell("-")] + [number_cell(None)] * len(SUMMARY_COLUMNS)
        ids = " ".join(str(i) for i in group.index)
        body.append(f'<tr data-ids="{ids}">{"".join(cells)}</tr>')
    return table_html("summary-table", headers, body)


def _latency_ci_cell(row: pd.Series) -> str:
    """The 95% interval's half-width as a share of the mean latency (`±4.2%`, report.md's), sorted by that share."""
    percent = ci_percent(row)
    if percent is None:
        return number_cell(None)
    return number_cell(percent, f"±{percent:.1f}%{'*' if row.get(R.converged) == 'false' else ''}")


def _summary_groups(table: pd.DataFrame) -> List[Tuple[tuple, pd.DataFrame]]:
    keys = [data.SERIES, R.scenario, R.input_length, R.output_length]
    order = {name: i for i, name in enumerate(data.series_order(table))}
    groups = list(table.groupby(keys, sort=False, dropna=False))
    return sorted(groups, key=lambda item: (order[item[0][0]], str(item[0][1]), item[0][2], item[0][3]))

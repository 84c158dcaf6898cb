"""Pure functions over the results table: filter, name the series, split plotted from dropped, Pareto.

A series is one curve: the rows that share the series columns (default: hardware, backend,
parallelism and model). Labels name only the columns that differ between series, since what is
common to all of them is already in the chart title.

What only stream rows need (their groups, rate axis, SLO and batching) is in stream/selections.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from harness.measure.columns.names import R
from plots.errors import PlotError
from plots.load import BATCH, POINT_COLUMNS, SOURCE_COLUMN, STREAM, STREAM_POINT_COLUMNS

DEFAULT_SERIES_COLUMNS = (R.hardware, R.backend, R.tp_size, R.pp_size, R.num_devices, R.nodes, R.model)
# Asked for when the chosen columns leave two rows of one curve at the same point (say two runs
# on one machine): a zig-zag through both would be wrong, two labelled curves are not.
DISAMBIGUATING_COLUMNS = DEFAULT_SERIES_COLUMNS + (R.workload, R.dtype, R.benchmark_name, SOURCE_COLUMN)
SERIES_CHOICES = (R.benchmark_name, R.backend, R.model, R.dtype, R.hardware, R.num_devices, R.tp_size, R.pp_size,
                  R.nodes, R.workload,
                  SOURCE_COLUMN)
SERIES = "series"
PLOTTED_STATUS = "ok"
NO_OUTPUT_LENGTH = 0  # an embeddings or rerank point's (harness/config/sweep_values.py)
_VALUE_FORMATS = {R.tp_size: "TP {}", R.pp_size: "PP {}", R.num_devices: "{} devices", R.nodes: "{} nodes",
                  R.dtype: "{}"}


def pools(output_length: object) -> bool:
    """Whether a point of this output length is an embeddings or rerank point: output length 0, answers that come
    whole with no output tokens, charted and ranked by what they take in (docs/measurement.md, "Embeddings and
    rerank"). A sweep never mixes them with points that generate (harness/config/sweep.py)."""
    value = pd.to_numeric(pd.Series([output_length]), errors="coerce").iloc[0]
    return bool(value == NO_OUTPUT_LENGTH)


def parse_where(items: Iterable[str]) -> Dict[str, str]:
    """`["backend=hf", "batch_size=1,4"]` -> {"backend": "hf", "batch_size": "1,4"}; PlotError on bad syntax."""
    where: Dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise PlotError(f"--where {item!r}: expected key=value, e.g. --where backend=hf")
        where[key.strip()] = value.strip()
    return where


def apply_where(table: pd.DataFrame, where: Optional[Dict[str, str]]) -> pd.DataFrame:
    """Rows whose text in each column equals the value, or one of its comma-separated values."""
    for column, value in (where or {}).items():
        if column not in table.columns:
            raise PlotError(f"--where {column}={value}: unknown column {column!r}; "
                            f"choose from: {', '.join(table.columns)}")
        wanted = [v.strip() for v in value.split(",")]
        matched = table[table[column].astype(str).isin(wanted)]
        if matched.empty:
            present = ", ".join(sorted(set(table[column].astype(str))))
            raise PlotError(f"--where {column}={value}: no rows match (values present: {present})")
        table = matched
    return table


def check_series_columns(columns: Sequence[str]) -> None:
    unknown = [c for c in columns if c not in SERIES_CHOICES]
    if unknown:
        raise PlotError(f"--series: unknown column {unknown[0]!r}; choose from: {', '.join(SERIES_CHOICES)}")
    if not columns:
        raise PlotError(f"--series: name at least one column from: {', '.join(SERIES_CHOICES)}")


def series_columns(table: pd.DataFrame, requested: Optional[Sequence[str]] = None) -> List[str]:
    """The requested columns (or the defaults), plus the fewest extra ones that make every point unique."""
    # The defaults a table lacks (the parallel layout, in results from before it was recorded) are left out.
    columns = list(requested) if requested else [c for c in DEFAULT_SERIES_COLUMNS if c in table.columns]
    check_series_columns(columns)
    point = [c for c in (R.scenario, *POINT_COLUMNS, *STREAM_POINT_COLUMNS) if c in table.columns]
    for extra in DISAMBIGUATING_COLUMNS:
        if not table.duplicated(columns + point).any():
            break
        if extra not in columns and extra in table.columns:
            columns.append(extra)
    return columns


def varying_columns(table: pd.DataFrame, columns: Sequence[str]) -> List[str]:
    return [c for c in columns if table[c].astype(str).nunique() > 1]


def format_value(column: str, value: object) -> str:
    text = str(value)
    if column in (R.num_devices, R.nodes) and text == "1":
        return f"1 {column[4:-1] if column == R.num_devices else 'node'}"
    return _VALUE_FORMATS.get(column, "{}").format(text)


def series_labels(table: pd.DataFrame, columns: Sequence[str], fallback: Sequence[str] = ()) -> pd.Series:
    """One label per row, from the columns whose values differ between rows (`fallback` if none do)."""
    shown = varying_columns(table, columns) or [c for c in fallback if c in table.columns] or list(columns)
    return table[shown].astype(str).apply(lambda row: " · ".join(format_value(c, row[c]) for c in shown), axis=1)


def with_series(table: pd.DataFrame, requested: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """A copy of the table with a `series` column naming the curve each row belongs to."""
    out = table.copy()
    # With a single default series, hardware and backend are what a reader needs from the legend.
    fallback = list(requested) if requested else [R.hardware, R.backend]
    out[SERIES] = series_labels(out, series_columns(out, requested), fallback)
    return out


def series_order(table: pd.DataFrame) -> List[str]:
    """Series in order of first appearance, so the first results folder given is the first colour."""
    return list(dict.fromkeys(table[SERIES]))


def of_scenario(table: pd.DataFrame, scenario: str) -> pd.DataFrame:
    """The batch rows or the stream rows (a table read without a `scenario` column is all batch)."""
    if R.scenario not in table.columns:
        return table if scenario == BATCH else table.iloc[0:0]
    return table[table[R.scenario] == scenario]


def plotted(table: pd.DataFrame) -> pd.DataFrame:
    """Only the `ok` rows, by series (first seen first), lengths and load: lines follow batch size or rate."""
    ok = table[table[R.status] == PLOTTED_STATUS]
    rank = {name: i for i, name in enumerate(series_order(table))}
    keys = [c for c in (R.input_length, R.output_length, R.batch_size, R.request_rate) if c in ok.columns]
    by_lengths = ok.sort_values(keys, kind="stable")
    return by_lengths.sort_values(SERIES, key=lambda column: column.map(rank), kind="stable")


def dropped(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that are not plotted: oom, skipped and error points."""
    return table[table[R.status] != PLOTTED_STATUS]


def require_plottable(table: pd.DataFrame) -> None:
    """PlotError naming the statuses when not a single point ended ok."""
    if (table[R.status] == PLOTTED_STATUS).any():
        return
    counts = table[R.status].replace("", "unknown").value_counts()
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    raise PlotError(f"nothing to plot: none of the {len(table)} points ended ok ({summary})")


def results_table(sources: Sequence[Path], series: Optional[Sequence[str]], where: Optional[Dict[str, str]]
                  ) -> pd.DataFrame:
    """The rows a report (and `--best`) reads: every source's results.csv, filtered by --where, with its series, as
    numbers; PlotError for an unknown column or when no point ended ok."""
    from plots.load import load_results, to_numbers

    if series is not None:
        check_series_columns(series)
    table = apply_where(load_results(list(sources)), where)
    require_plottable(table)
    return to_numbers(with_series(table, series))


def describe_dropped(rows: pd.DataFrame, with_lengths: bool = False,
                     with_series: Optional[bool] = None) -> List[str]:
    """`"bs 64 (oom)"` (a stream point: `"rate 4/s (oom)"`) per dropped row in series, length and load order.

    Prefixed by the series when `with_series` (default: when the rows hold several series).
    """
    if with_series is None:
        with_series = SERIES in rows and rows[SERIES].nunique() > 1
    items = []
    for _, row in _in_point_order(rows).iterrows():
        lengths = f" @ in {row[R.input_length]}/out {row[R.output_length]}" if with_lengths else ""
        prefix = f"{row[SERIES]}: " if with_series else ""
        items.append(f"{prefix}{load_text(row)}{lengths} ({row[R.status] or 'unknown'})")
    return items


def load_text(row: pd.Series) -> str:
    """`bs 64` for a batch point; `rate 4/s`, `burst` and `, cap 8` for a stream point."""
    if row.get(R.scenario, BATCH) != STREAM:
        return f"bs {row[R.batch_size]}"
    return rate_text(row[R.request_rate]) + cap_text(row.get(R.max_concurrency), ", cap {}")


def rate_text(rate: object, unit: str = "rate {:g}/s") -> str:
    """`rate 4/s` (or `unit` filled in) for an offered rate; `burst` for inf (every request at once)."""
    value = pd.to_numeric(rate, errors="coerce")
    if pd.isna(value):
        return "rate ?"
    return "burst" if np.isinf(value) else unit.format(float(value))


def cap_text(cap: object, form: str = "max concurrency {}") -> str:
    """`form` with the concurrency cap, or nothing when there is none."""
    value = pd.to_numeric(cap, errors="coerce")
    return "" if pd.isna(value) else form.format(int(value))


def _in_point_order(rows: pd.DataFrame) -> pd.DataFrame:
    # Numbers may still be text here (the table as read): sort them as numbers all the same.
    keys = [c for c in (SERIES, *POINT_COLUMNS[1:], POINT_COLUMNS[0], *STREAM_POINT_COLUMNS) if c in rows]
    rank = {name: i for i, name in enumerate(dict.fromkeys(rows[SERIES]))} if SERIES in rows else {}
    return rows.sort_values(keys, kind="stable", key=lambda col: col.map(rank) if col.name == SERIES
                            else pd.to_numeric(col, errors="coerce"))


def pareto_frontier(latency_ms: Sequence[float], throughput: Sequence[float]) -> np.ndarray:
    """Indices of the points no other point beats on both (lower latency, higher throughput), by latency."""
    latency = np.asarray(latency_ms, dtype=float)
    rate = np.asarray(throughput, dtype=float)
    # Fastest first; among equal latencies the highest throughput first, so it alone can win.
    order = np.lexsort((-rate, latency))
    frontier, best_rate = [], -np.inf
    for i in order:
        if np.isfinite(latency[i]) and np.isfinite(rate[i]) and rate[i] > best_rate:
            frontier.append(i)
            best_rate = rate[i]
    return np.asarray(frontier, dtype=int)


@dataclass(frozen=True)
class Curve:
    """One line on a chart: its legend name, the points in drawing order, and each point's batch size
    (empty for stream points)."""

    name: str
    x: Tuple[float, ...]
    y: Tuple[float, ...]
    batch_sizes: Tuple[int, ...]


def build_curves(rows: pd.DataFrame, x_column: str, y_column: str, by: str = SERIES,
                 order_by: Optional[str] = None) -> List[Curve]:
    """One curve per value of `by` (series in first-seen order, numbers ascending), NaN points left out."""
    curves = []
    for name, group in rows.groupby(by, sort=by != SERIES):
        group = group.dropna(subset=[x_column, y_column]).sort_values(order_by or x_column, kind="stable")
        if not group.empty:
            # Stream points have no batch size: their curves carry none.
            sizes = group[R.batch_size] if R.batch_size in group else pd.Series([], dtype=float)
            batch_sizes = tuple(int(b) for b in sizes) if sizes.notna().all() else ()
            curves.append(Curve(str(name), tuple(group[x_column].astype(float)), tuple(group[y_column].astype(float)),
                                batch_sizes))
    return curves


def median_over_output_lengths(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """`column` per (series, batch size, input length), the median over output lengths.

    Prefill does not depend on how many tokens are decoded afterwards, so each output length is
    one more measurement of the same TTFT; the median keeps one noisy point from moving the line.
    """
    keys = [SERIES, R.batch_size, R.input_length]
    return rows.dropna(subset=[column]).groupby(keys, sort=False, as_index=False)[column].median()


def fmt(value: object) -> str:
    """Three significant figures: 1,316 / 41.2 / 3.24; two below 1 (0.47, 0.0031), so a small share never reads
    0.00 (under 1e-4 in scientific notation); '-' when empty."""
    if value is None or pd.isna(value):
        return "-"
    number = float(value)
    if abs(number) >= 100:
        return f"{number:,.0f}"
    if 0 < abs(number) < 1:
        return f"{number:.2g}" if abs(number) >= 1e-4 else f"{number:.1e}"
    return f"{number:.1f}" if abs(number) >= 10 else f"{number:.2f}"


def latency_with_ci(row: pd.Series) -> str:
    """`165 ±1.2%`: the mean latency and its 95% interval's half-width as a share of it; `*` when num_batches: auto
    stopped before the interval was narrow enough."""
    low, high, mean = row.get(R.latency_ms_ci95_low), row.get(R.latency_ms_ci95_high), row[R.latency_ms_mean]
    if low is None or pd.isna(low) or not mean:
        return fmt(mean)
    mark = "*" if row.get(R.converged) == "false" else ""
    return f"{fmt(mean)} ±{(high - low) / 2 / mean:.1%}{mark}"


def length_pairs(rows: pd.DataFrame) -> List[Tuple[int, int]]:
    """Every (input_length, output_length) in the rows, ascending."""
    pairs = rows[[R.input_length, R.output_length]].drop_duplicates().itertuples(index=False)
    return sorted((int(i), int(o)) for i, o in pairs)


def prompts_text(rows: pd.DataFrame) -> str:
    """`, prompts: chats.jsonl (chat)` when a prompt file was measured; nothing for random token ids."""
    files = [w for w in dict.fromkeys(rows[R.workload].astype(str)) if w != "random"]
    return f", prompts: {', '.join(files)}" if files else ""


def table_head(header: str, text_columns: int) -> List[str]:
    """A markdown table's header and separator: the first `text_columns` left-aligned, the numbers right-aligned."""
    columns = header.count("|") - 1
    return [header, "|" + "|".join(["---"] * text_columns + ["--:"] * (columns - text_columns)) + "|"]


def unique_text(rows: pd.DataFrame, column: str) -> str:
    """The distinct values of a column, joined: the model and dtype part of a title."""
    return ", ".join(dict.fromkeys(rows[column].astype(str)))


def accuracy_text(row: pd.Series) -> str:
    """`0.130 (-0.020, -0.110 to +0.070)`: accuracy.tasks' exact-match share and its change from the entry's reference
    (unquantized or unspeculated), with the change's interval; `-` without tasks."""
    value, delta = row.get(R.accuracy), row.get(R.accuracy_delta)
    if value is None or pd.isna(value):
        return "-"
    if delta is None or pd.isna(delta):
        return f"{value:.3f}"
    low, high = row.get(R.accuracy_delta_ci95_low), row.get(R.accuracy_delta_ci95_high)
    interval = "" if low is None or pd.isna(low) else f", {low:+.3f} to {high:+.3f}"
    return f"{value:.3f} ({delta:+.3f}{interval})"


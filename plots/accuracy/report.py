"""report.md's "Accuracy against throughput": each entry with task accuracy at its fastest point, its accuracy with
its interval, and whether another entry is both faster and at least as accurate (docs/measurement.md, "Accuracy")."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.accuracy.points import FRONTIER, fastest_scored
from plots.data import SERIES, fmt

HEADER = ("| series | input | output | highest throughput (tokens/s) | at | task accuracy (95% interval) | examples "
          "| change against its reference | on the frontier |")


NOTE = ("Each entry's task accuracy (answered once, through the engine or server it timed) beside its highest "
        "throughput at each length pair. Off the frontier: another entry at the same lengths is faster beyond both "
        "throughput intervals and at least as accurate, or more accurate beyond both accuracy intervals and at least "
        "as fast; it costs speed or accuracy for nothing. Streams have none: their throughput is the load they were "
        "offered.")


def accuracy_lines(table: pd.DataFrame) -> List[str]:
    """The section; nothing when no entry answered tasks."""
    best = fastest_scored(table)
    if best.empty:
        return []
    lines = ["## Accuracy against throughput", "", NOTE, "", *data.table_head(HEADER, 3)]
    for _, r in best.iterrows():
        low, high, examples = r[R.accuracy_ci95_low], r[R.accuracy_ci95_high], r[R.accuracy_examples]
        interval = "" if pd.isna(low) or pd.isna(high) else f" ({low:.3f}-{high:.3f})"
        change = data.accuracy_text(r).partition(" ")[2].strip("()") or "-"
        cells = [str(r[SERIES]), str(r[R.input_length]), str(r[R.output_length]), fmt(r[R.throughput_tokens_per_s]),
                 data.load_text(r), f"{r[R.accuracy]:.3f}{interval}", "-" if pd.isna(examples) else str(int(examples)),
                 change, "-" if r[FRONTIER] is None else "yes" if r[FRONTIER] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def accuracy_html(table: pd.DataFrame) -> str:
    """report.html's section: the same rows as report.md's, sortable, each hidden with its point by the filters."""
    import html

    from plots.html.tables import number_cell, table_html, text_cell

    best = fastest_scored(table)
    if best.empty:
        return ""
    body = []
    for index, r in best.iterrows():
        frontier = "-" if r[FRONTIER] is None else "yes" if r[FRONTIER] else "no"
        cells = [text_cell(r[SERIES]), number_cell(r[R.input_length], str(r[R.input_length])),
                 number_cell(r[R.output_length], str(r[R.output_length])), number_cell(r[R.throughput_tokens_per_s]),
                 text_cell(data.load_text(r)), number_cell(r[R.accuracy], f"{r[R.accuracy]:.3f}"),
                 number_cell(r[R.accuracy_ci95_low], _three(r[R.accuracy_ci95_low])),
                 number_cell(r[R.accuracy_ci95_high], _three(r[R.accuracy_ci95_high])),
                 number_cell(r[R.accuracy_examples], _count(r[R.accuracy_examples])),
                 text_cell(data.accuracy_text(r).partition(" ")[2].strip("()") or "-"), text_cell(frontier)]
        body.append(f'<tr data-ids="{index}">{"".join(cells)}</tr>')
    headers = ["Series", "Input", "Output", "Highest throughput (tokens/s)", "At", "Task accuracy", "95% low",
               "95% high", "Examples", "Change against its reference", "On the frontier"]
    return (f'<section id="accuracy"><h2>Accuracy against throughput</h2><p class="note">{html.escape(NOTE)}</p>'
            f"{table_html('accuracy-table', headers, body)}</section>")


def _three(value: object) -> str:
    return "-" if pd.isna(value) else f"{value:.3f}"


def _count(value: object) -> str:
    return "-" if pd.isna(value) else str(int(value))

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


def accuracy_lines(table: pd.DataFrame) -> List[str]:
    """The section; nothing when no entry answered tasks."""
    best = fastest_scored(table)
    if best.empty:
        return []
    lines = ["## Accuracy against throughput", "",
             "Each entry's task accuracy (answered once, through the engine or server it timed) beside its highest "
             "throughput at each length pair. Off the frontier: another entry at the same lengths is faster beyond "
             "both throughput intervals and at least as accurate, or more accurate beyond both accuracy intervals "
             "and at least as fast; it costs speed or accuracy for nothing. Streams have none: their throughput is "
             "the load they were offered.", "",
             *data.table_head(HEADER, 3)]
    for _, r in best.iterrows():
        low, high, examples = r[R.accuracy_ci95_low], r[R.accuracy_ci95_high], r[R.accuracy_examples]
        interval = "" if pd.isna(low) or pd.isna(high) else f" ({low:.3f}-{high:.3f})"
        change = data.accuracy_text(r).partition(" ")[2].strip("()") or "-"
        cells = [str(r[SERIES]), str(r[R.input_length]), str(r[R.output_length]), fmt(r[R.throughput_tokens_per_s]),
                 data.load_text(r), f"{r[R.accuracy]:.3f}{interval}", "-" if pd.isna(examples) else str(int(examples)),
                 change, "-" if r[FRONTIER] is None else "yes" if r[FRONTIER] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]

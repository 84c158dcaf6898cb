"""report.md's speculative decoding section: a table per method, and a warning wherever speculation changed the
greedy tokens or, with accuracy tasks, the answers (docs/measurement.md, "Speculative decoding", "Accuracy")."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.data import SERIES, fmt
from plots.speculative.charts import speculative_mask

SPEC_HEADER = ("| series | vs | k | input | output | load | acceptance | accepted length | TPOT (ms) "
               "| TPOT speed-up | tokens identical | task accuracy (change, its 95% interval) |")


def spec_lines(table: pd.DataFrame) -> List[str]:
    """The whole section; nothing when no entry speculates."""
    rows = table[speculative_mask(table) & (table[R.status] == data.PLOTTED_STATUS)]
    if rows.empty:
        return []
    lines = ["## Speculative decoding", "",
             "Speed-up: the same engine's mean TPOT without speculation at the same point / this one's. Acceptance: "
             "accepted / proposed draft tokens; accepted length: tokens a verifying pass emits, its own included. "
             "Tokens identical: share of greedy tokens equal to the baseline's, which speculation must not change.",
             ""]
    for method in sorted(rows[R.spec_method].astype(str).unique()):
        lines += [f"### {method}", "", *spec_table(rows[rows[R.spec_method].astype(str) == method]), ""]
    lines += changed_tokens(rows) + changed_answers(rows)
    return lines


def spec_table(rows: pd.DataFrame) -> List[str]:
    lines = data.table_head(SPEC_HEADER, 2)
    for series in data.series_order(rows):
        of_series = rows[rows[SERIES] == series]
        for _, r in of_series.sort_values([R.input_length, R.output_length, R.batch_size, R.request_rate]).iterrows():
            k = r[R.spec_tokens]
            cells = [series, str(r[R.spec_baseline]) if pd.notna(r[R.spec_baseline]) else "-",
                     str(int(k)) if pd.notna(k) else "-", str(r[R.input_length]), str(r[R.output_length]),
                     data.load_text(r), fmt(r[R.acceptance_rate]), fmt(r[R.mean_accepted_length]),
                     fmt(r[R.tpot_ms_mean]), fmt(r[R.speedup_vs_baseline]), fmt(r[R.tokens_identical_share]),
                     data.accuracy_text(r)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def changed_tokens(rows: pd.DataFrame) -> List[str]:
    changed = rows[rows[R.tokens_identical_share] < 1]
    return [f"**Warning:** {r[SERIES]} at {data.load_text(r)}, input {r[R.input_length]} / output "
            f"{r[R.output_length]}: {r[R.tokens_identical_share]:.1%} of its greedy tokens match "
            f"{r[R.spec_baseline]}'s. Speculation changed the output (the method, or the numerics of verifying "
            "several tokens in one pass)." for _, r in changed.iterrows()] + ([""] if len(changed) else [])


def changed_answers(rows: pd.DataFrame) -> List[str]:
    """A warning per entry whose task accuracy fell below its baseline's beyond the interval: speculation, greedy or
    sampled, must keep the target's answers."""
    if R.accuracy_delta_ci95_high not in rows:
        return []
    fell = rows[rows[R.accuracy_delta_ci95_high] < 0].drop_duplicates(SERIES)
    return [f"**Warning:** {r[SERIES]} answers {r[R.accuracy]:.3f} of the accuracy tasks, {-r[R.accuracy_delta]:.3f} "
            f"below {r[R.spec_baseline]} ({r[R.accuracy_delta_ci95_low]:+.3f} to "
            f"{r[R.accuracy_delta_ci95_high]:+.3f}): speculation changed what the model answers, which it must not."
            for _, r in fell.iterrows()] + ([""] if len(fell) else [])

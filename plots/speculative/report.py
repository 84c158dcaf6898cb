"""report.md's speculative decoding section: a table per method, and a warning wherever speculation changed the
greedy tokens (docs/measurement.md, "Speculative decoding")."""

from __future__ import annotations

from typing import List

import pandas as pd

from plots import data
from plots.data import SERIES, fmt
from plots.speculative.charts import speculative_mask

SPEC_HEADER = ("| series | vs | k | input | output | load | acceptance | accepted length | TPOT (ms) "
               "| TPOT speed-up | tokens identical |")


def spec_lines(table: pd.DataFrame) -> List[str]:
    """The whole section; nothing when no entry speculates."""
    rows = table[speculative_mask(table) & (table["status"] == data.PLOTTED_STATUS)]
    if rows.empty:
        return []
    lines = ["## Speculative decoding", "",
             "Speed-up: the same engine's mean TPOT without speculation at the same point / this one's. Acceptance: "
             "accepted / proposed draft tokens; accepted length: tokens a verifying pass emits, its own included. "
             "Tokens identical: share of greedy tokens equal to the baseline's, which speculation must not change.",
             ""]
    for method in sorted(rows["spec_method"].astype(str).unique()):
        lines += [f"### {method}", "", *spec_table(rows[rows["spec_method"].astype(str) == method]), ""]
    lines += changed_tokens(rows)
    return lines


def spec_table(rows: pd.DataFrame) -> List[str]:
    lines = data.table_head(SPEC_HEADER, 2)
    for series in data.series_order(rows):
        of_series = rows[rows[SERIES] == series]
        for _, r in of_series.sort_values(["input_length", "output_length", "batch_size", "request_rate"]).iterrows():
            k = r["spec_tokens"]
            cells = [series, str(r["spec_baseline"]) if pd.notna(r["spec_baseline"]) else "-",
                     str(int(k)) if pd.notna(k) else "-", str(r["input_length"]), str(r["output_length"]),
                     data.load_text(r), fmt(r["acceptance_rate"]), fmt(r["mean_accepted_length"]),
                     fmt(r["tpot_ms_mean"]), fmt(r["speedup_vs_baseline"]), fmt(r["tokens_identical_share"])]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def changed_tokens(rows: pd.DataFrame) -> List[str]:
    changed = rows[rows["tokens_identical_share"] < 1]
    return [f"**Warning:** {r[SERIES]} at {data.load_text(r)}, input {r['input_length']} / output "
            f"{r['output_length']}: {r['tokens_identical_share']:.1%} of its greedy tokens match "
            f"{r['spec_baseline']}'s. Speculation changed the output (the method, or the numerics of verifying "
            "several tokens in one pass)." for _, r in changed.iterrows()] + ([""] if len(changed) else [])

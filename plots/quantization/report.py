"""report.md's quantization section (docs/measurement.md, "Quantization"): per engine and point, the fastest setting
whose accuracy price is within quality.max_logits_rel_error (and quality.max_accuracy_drop, where set), and every
compared point with its price."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

import pandas as pd

from harness.measure.columns.names import R
from plots import data, load
from plots.data import SERIES, fmt
from plots.quantization.groups import Family, accuracy_bound, accuracy_drop_bound, families, point_keys, shared_points

FASTEST_HEADER = ("| engine | input | output | load | fastest within the bound | tokens/s | vs unquantized "
                  "| its logits error | faster, over the bound |")
POINTS_HEADER = ("| series | vs | input | output | load | weights (MB) | tokens/s | TPOT (ms) | logits rel. error "
                 "| top-1 agreement | perplexity (change) | task accuracy (change, its 95% interval) |")


def quantization_lines(table: pd.DataFrame, sources: Sequence[Path]) -> List[str]:
    """The whole section; nothing when no quantized entry was compared with an unquantized one."""
    found = families(table)
    if not found:
        return []
    bound, drop = accuracy_bound(sources), accuracy_drop_bound(sources)
    also = "" if drop is None else (f", and task accuracy at most {drop:g} below the unquantized entry's "
                                    "(quality.max_accuracy_drop)")
    lines = ["## Quantization", "",
             f"Each quantized series against the same engine unquantized, on the same inputs. Logits error: relative "
             f"L2 error of the last prompt position's logits; top-1 agreement: share of prompt positions whose "
             f"argmax agrees. Bound: logits error at most {bound:g} (quality.max_logits_rel_error){also}.", "",
             "### Fastest within the accuracy bound", "", *data.table_head(FASTEST_HEADER, 5)]
    for family in found:
        for scenario in (load.BATCH, load.STREAM):
            lines += _fastest_rows(family, scenario, bound, drop)
    lines += ["", "### Every compared point", "", *data.table_head(POINTS_HEADER, 2)]
    for family in found:
        lines += _point_rows(family)
    return lines + [""]


def _fastest_rows(family: Family, scenario: str, bound: float, drop: Optional[float]) -> List[str]:
    rows = shared_points(Family(family.reference, data.of_scenario(family.rows, scenario)), point_keys(scenario))
    out = []
    for _, at in rows.groupby(point_keys(scenario), dropna=False, sort=True):
        plain = at[at[R.quantization] == "none"]
        errors = at[R.logits_rel_error].where(at[R.quantization] != "none", 0.0)
        inside, beyond = errors <= bound, errors > bound  # a point not compared is neither
        if drop is not None and R.accuracy_delta in at:  # a point without tasks is held to its logits alone
            dropped = at[R.accuracy_delta] < -drop
            inside, beyond = inside & ~dropped, beyond | dropped
        within = at[inside]
        if plain.empty or within.empty:
            continue
        best = within.loc[within[R.throughput_tokens_per_s].idxmax()]
        over = at[beyond & (at[R.throughput_tokens_per_s] > best[R.throughput_tokens_per_s])]
        faster = "; ".join(f"{r[SERIES]} ({fmt(r[R.throughput_tokens_per_s])} tokens/s, error "
                           f"{fmt(r[R.logits_rel_error])}{_drop_text(r)})" for _, r in over.iterrows()) or "-"
        ratio = best[R.throughput_tokens_per_s] / plain[R.throughput_tokens_per_s].iloc[0]
        cells = [family.reference, str(best[R.input_length]), str(best[R.output_length]), data.load_text(best),
                 str(best[SERIES]), fmt(best[R.throughput_tokens_per_s]), f"{ratio:.2f}x",
                 fmt(0.0 if best[R.quantization] == "none" else best[R.logits_rel_error]), faster]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _point_rows(family: Family) -> List[str]:
    ok = family.rows[family.rows[R.status] == data.PLOTTED_STATUS]
    out = []
    for series in family.series:
        for _, r in ok[ok[SERIES] == series].iterrows():
            weights = r.get(R.weight_bytes)
            cells = [str(series), str(r.get(R.quality_reference) or "-") if r[R.quantization] != "none" else "-",
                     str(r[R.input_length]), str(r[R.output_length]), data.load_text(r),
                     "-" if weights is None or pd.isna(weights) else fmt(weights / 1e6),
                     fmt(r[R.throughput_tokens_per_s]), fmt(r.get(R.tpot_ms_mean)), fmt(r.get(R.logits_rel_error)),
                     fmt(r.get(R.top1_agreement)), _perplexity_text(r), data.accuracy_text(r)]
            out.append("| " + " | ".join(cells) + " |")
    return out


def _perplexity_text(row: pd.Series) -> str:
    """`7.31 (+0.042)`: quality.text's perplexity and its change from the unquantized entry's; `-` without a text."""
    value, delta = row.get(R.perplexity), row.get(R.perplexity_delta)
    if value is None or pd.isna(value):
        return "-"
    return fmt(value) + ("" if delta is None or pd.isna(delta) else f" ({delta:+.3g})")


def _drop_text(row: pd.Series) -> str:
    """`, accuracy -0.040` where the row's task accuracy changed, else nothing."""
    delta = row.get(R.accuracy_delta)
    return "" if delta is None or pd.isna(delta) else f", accuracy {delta:+.3f}"

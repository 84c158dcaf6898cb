"""Speculative decoding: TPOT speed-up over the same engine without speculation, and acceptance, against batch size
(docs/measurement.md, "Speculative decoding"). Speculation pays while the verifying pass is nearly free, which it
stops being as the batch fills the hardware: the speed-up chart shows where it crosses 1."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots.charts import Chart, ChartContext, ChartJob, GridChart, scenario_jobs, series_grid
from plots.load import BATCH


def speculative_mask(table: pd.DataFrame) -> pd.Series:
    """Rows of entries that speculate (`spec_method` filled); none in results from before the column."""
    if R.spec_method not in table.columns:
        return pd.Series(False, index=table.index)
    return table[R.spec_method].fillna("").astype(str).str.strip() != ""


def baselines_note(rows: pd.DataFrame) -> str:
    """`Each series vs its baseline: vllm-ngram4 vs vllm.` (or says that a series has none)."""
    pairs = rows.drop_duplicates("series")
    items = [f"{r.series} vs {r.spec_baseline}" if str(r.spec_baseline).strip() not in ("", "nan")
             else f"{r.series}: no baseline entry" for r in pairs.itertuples()]
    return "Each series vs the same engine without speculation: " + "; ".join(items) + "."


def speedup_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    rows = ctx.ok[speculative_mask(ctx.ok)].dropna(subset=[R.speedup_vs_baseline])
    if rows.empty:
        return []
    grid = GridChart(R.speedup_vs_baseline, "TPOT speed-up (baseline TPOT / TPOT)",
                     "speculative decoding: TPOT speed-up vs batch size", "spec_speedup_vs_batch_size",
                     reference_y=1.0, reference_label="no speed-up")
    return [series_grid(ctx, rows, grid, caption_mask=speculative_mask(ctx.table), note=baselines_note(rows))]


def acceptance_vs_batch_size(ctx: ChartContext) -> List[Chart]:
    rows = ctx.ok[speculative_mask(ctx.ok)].dropna(subset=[R.acceptance_rate])
    if rows.empty:
        return []
    grid = GridChart(R.acceptance_rate, "acceptance rate (accepted / proposed)",
                     "speculative decoding: acceptance rate vs batch size", "spec_acceptance_vs_batch_size")
    return [series_grid(ctx, rows, grid, caption_mask=speculative_mask(ctx.table))]


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """Both charts over the batch points; none when no entry speculates."""
    if not speculative_mask(ctx.table).any():
        return []
    return scenario_jobs(ctx, BATCH, (speedup_vs_batch_size, acceptance_vs_batch_size))

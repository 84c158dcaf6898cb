"""Throughput and TPOT per quantization, per engine: a bar per setting at the largest batch every setting of the
engine ran ok (per length pair), each throughput bar labelled with its accuracy price against the unquantized
entry (docs/measurement.md, "Quantization"). Batch points only: a stream's figures depend on its load too, and the
report's tables hold them."""

from __future__ import annotations

from typing import List

import numpy as np
import pandas as pd

from harness.measure.columns.names import R
from plots import data, style
from plots.charts import Chart, ChartContext, ChartJob, finish, model_and_dtype, scenario_jobs
from plots.data import SERIES
from plots.quantization.groups import BATCH_KEYS, Family, families, price_text, shared_points
from plots.load import BATCH

SECTION = "Quantization: speed and its accuracy price"
PANELS = ((R.throughput_tokens_per_s, "throughput (output tokens/s)"), (R.tpot_ms_mean, "TPOT (ms, mean)"))


def quantization_charts(ctx: ChartContext) -> List[Chart]:
    charts = []
    for family in families(ctx.table):
        rows = shared_points(family, BATCH_KEYS)
        if rows.empty:
            continue
        largest = rows.groupby([R.input_length, R.output_length])[R.batch_size].transform("max")
        charts.append(_one(ctx, family, rows[rows[R.batch_size] == largest]))
    return charts


def _one(ctx: ChartContext, family: Family, rows: pd.DataFrame) -> Chart:
    pairs = data.length_pairs(rows)
    fig, axes = style.new_grid(len(pairs), len(PANELS))
    names = [s for s in family.series if s in set(rows[SERIES])]
    x = np.arange(len(names))
    for r, (input_length, output_length) in enumerate(pairs):
        at = rows[(rows[R.input_length] == input_length) & (rows[R.output_length] == output_length)]
        at = at.set_index(SERIES).loc[names]
        for c, (column, label) in enumerate(PANELS):
            ax = axes[r, c]
            bars = ax.bar(x, at[column], color=[ctx.palette.series_colors[n] for n in names], width=0.6)
            if column == PANELS[0][0]:
                for bar, (_, row) in zip(bars, at.iterrows()):
                    text = "reference" if row[R.quantization] == "none" else price_text(row)
                    ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                                va="bottom", fontsize=8.5, xytext=(0, 2), textcoords="offset points")
            ax.set_xticks(x, names)
            ax.set_ylabel(label)
            ax.set_title(f"input {input_length} / output {output_length}, batch {int(at[R.batch_size].iloc[0])}",
                         fontsize=11)
            ax.margins(y=0.15)
    title = f"{model_and_dtype(rows)}: {family.reference} by quantization"
    fig.subplots_adjust(hspace=0.5, wspace=0.3, top=1.0 - 0.95 / fig.get_figheight())
    fig.suptitle(title, x=axes[0, 0].get_position().x0, y=1.0 - 0.35 / fig.get_figheight(), ha="left",
                 fontweight="bold")
    caption = ("Each length pair at the largest batch every setting ran ok. Over each throughput bar: the logits' "
               "relative error against the unquantized entry on the same inputs, and the share of prompt positions "
               "whose top-1 token agrees.")
    return finish(ctx, fig, f"quantization_{ctx.slugs[names[0]]}", SECTION, title, caption)


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """One chart per engine with quantized entries; none without."""
    if not families(ctx.table):
        return []
    return scenario_jobs(ctx, BATCH, (quantization_charts,))

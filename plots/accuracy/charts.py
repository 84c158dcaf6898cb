"""Task accuracy against throughput: per scenario and length pair, each entry with task accuracy at its fastest
point, its accuracy's 95% interval as a bar, the frontier (no entry both faster and as accurate) joined by a line
(docs/measurement.md, "Accuracy")."""

from __future__ import annotations

from typing import List

import pandas as pd

from harness.measure.columns.names import R
from plots import style
from plots.accuracy.points import FRONTIER, fastest_scored
from plots.charts import Chart, ChartContext, ChartJob, decorate, finish, model_and_dtype, scenario_jobs
from plots.data import SERIES
from plots.labels import PointLabel, place_point_labels
from plots.load import BATCH, STREAM

SECTION = "Accuracy against throughput"


def accuracy_charts(ctx: ChartContext) -> List[Chart]:
    best = fastest_scored(ctx.table)
    if best.empty:
        return []
    pairs = sorted({(int(i), int(o)) for i, o in zip(best[R.input_length], best[R.output_length])})
    fig, axes = style.new_grid(len(pairs), 1)
    for ax, (input_length, output_length) in zip(axes[:, 0], pairs):
        at = best[(best[R.input_length] == input_length) & (best[R.output_length] == output_length)]
        labels = []
        for _, row in at.iterrows():
            color = ctx.palette.series_colors[row[SERIES]]
            low, high = row[R.accuracy_ci95_low], row[R.accuracy_ci95_high]  # none in a row written without them
            error = [[0 if pd.isna(low) else row[R.accuracy] - low], [0 if pd.isna(high) else high - row[R.accuracy]]]
            ax.errorbar([row[R.throughput_tokens_per_s]], [row[R.accuracy]], yerr=error, fmt="o", color=color,
                        capsize=4, markersize=7)
            labels.append(PointLabel(row[R.throughput_tokens_per_s], row[R.accuracy], row[SERIES], color))
        front = at[at[FRONTIER].eq(True)].sort_values(R.throughput_tokens_per_s)
        if len(front) > 1:
            ax.plot(front[R.throughput_tokens_per_s], front[R.accuracy], linestyle="--", color="0.5", linewidth=1)
        decorate(ax, f"input {input_length} / output {output_length}", "highest throughput (output tokens/s)",
                 "task accuracy")
        ax.margins(x=0.15, y=0.1)
        place_point_labels(ax, labels)  # after the limits are set: positions are measured in pixels
    scenario = str(best[R.scenario].iloc[0])
    title = f"{model_and_dtype(best)}: task accuracy against throughput ({scenario})"
    fig.subplots_adjust(hspace=0.5, top=1.0 - 0.95 / fig.get_figheight())
    fig.suptitle(title, x=axes[0, 0].get_position().x0, y=1.0 - 0.35 / fig.get_figheight(), ha="left",
                 fontweight="bold")
    caption = ("Each entry at its highest-throughput ok point; its accuracy answered once through the engine or "
               "server it timed, with the 95% Wilson interval. Dashed (batch points): the frontier, where no entry is "
               "faster and as accurate, or more accurate and as fast, beyond the intervals.")
    return [finish(ctx, fig, f"accuracy_{scenario}", SECTION, title, caption)]


def chart_jobs(ctx: ChartContext) -> List[ChartJob]:
    """One chart per scenario whose entries answered tasks; none without."""
    if fastest_scored(ctx.table).empty:
        return []
    return scenario_jobs(ctx, BATCH, (accuracy_charts,)) + scenario_jobs(ctx, STREAM, (accuracy_charts,))

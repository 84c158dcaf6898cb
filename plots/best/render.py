"""The answer in three forms, the same in each (docs/guides/best.md): report.md's first section, the lines the
console prints at a sweep's end, and JSON for scripts and CI (`python -m plots DIR --best --format json`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional

import pandas as pd

from harness.measure.columns.names import R
from plots import data
from plots.best.answer import Answer, answers, checks, number, per_gpu, per_gpu_interval, pools, speed_words
from plots.headline import PER_USER
from plots.best.targets import Targets
from plots.data import SERIES, fmt

SECTION = "## The best configuration at your targets"


def figures(row: Optional[pd.Series], targets: Targets) -> Optional[Dict[str, object]]:
    """A point as the answer names it: its configuration, load and the figures the targets judge."""
    if row is None:
        return None
    low, high = per_gpu_interval(row)
    judged = {c.name: (None if math.isnan(c.value) else c.value) for c in checks(row, targets)}
    # keyed by results.csv's own names, where a key is that column's value
    return {"configuration": str(row[SERIES]), R.backend: str(row[R.backend]), R.hardware: str(row[R.hardware]),
            R.num_devices: _int(row.get(R.num_devices)), R.tp_size: _int(row.get(R.tp_size)),
            "load": data.load_text(row), R.batch_size: _int(row.get(R.batch_size)),
            R.request_rate: _none_if_nan(number(row, R.request_rate)),
            # embeddings and rerank make no output: the input tokens they take in are what ranks them
            ("input_tokens_per_s_per_gpu" if pools(row) else R.output_tokens_per_s_per_gpu): per_gpu(row),
            "output_tokens_per_s_per_gpu_ci95": None if math.isnan(low) or math.isnan(high) else [low, high],
            R.cost_per_million_output_tokens: _none_if_nan(number(row, R.cost_per_million_output_tokens)),
            R.output_tokens_per_s_per_user: _none_if_nan(number(row, PER_USER)),
            "judged": judged, "source": str(row.get(data.SOURCE_COLUMN, "") or "")}


def as_json(table: pd.DataFrame, targets: Targets, origin: str) -> List[Dict[str, object]]:
    """One object per answer (`python -m plots --best --format json`)."""
    out = []
    for a in answers(table, targets):
        out.append({**{k: (int(v) if k in (R.input_length, R.output_length) else str(v)) for k, v in a.group.items()},
                    "targets": targets.as_dict(), "targets_from": origin, "best": figures(a.best, targets),
                    "runner_up": figures(a.runner_up, targets), "margin_beyond_intervals": a.margin_beyond_intervals,
                    "met_by_none": None if a.best is not None else {"closest": figures(a.closest, targets),
                                                                    "misses": list(a.closest_misses)},
                    "points_considered": a.points_considered})
    return out


def sentence(a: Answer) -> str:
    """One answer in a line: the console's, and the JSON's words."""
    where = (f"{a.group[R.model]}, {a.group[R.scenario]}, input {a.group[R.input_length]} / output "
             f"{a.group[R.output_length]}, {a.group[R.hardware]}")
    if a.best is None:
        if a.closest is None:
            return f"{where}: no ok point"
        return (f"{where}: no point meets the targets; the closest, {a.closest[SERIES]} at {data.load_text(a.closest)}, "
                f"misses {'; '.join(a.closest_misses)}")
    text = (f"{where}: {a.best[SERIES]} at {data.load_text(a.best)}, {fmt(per_gpu(a.best))} "
            f"{speed_words(a.best)}{_cost(a.best)}")
    if a.runner_up is None:
        return text + " (the only configuration that meets them)"
    margin = {True: "beyond both intervals", False: "within their intervals: a tie",
              None: "intervals unknown"}[a.margin_beyond_intervals]
    return (text + f"; runner-up {a.runner_up[SERIES]} at {data.load_text(a.runner_up)}, "
            f"{fmt(per_gpu(a.runner_up))} ({margin})")


def console_lines(table: pd.DataFrame, targets: Targets, origin: str) -> List[str]:
    head = (f"Best configuration at the targets ({targets.describe()}; {origin}):" if targets.stated else
            "Best configuration (no targets stated, so the fastest point wins; state them in the sweep's `target` "
            "or with --ttft-ms, --tpot-ms, --min-user-tokens-per-s):")
    return [head, *(f"  {sentence(a)}" for a in answers(table, targets))]


def markdown_lines(table: pd.DataFrame, targets: Targets, origin: str) -> List[str]:
    """report.md's first section."""
    found = answers(table, targets)
    pooled = (" (embeddings and rerank, which make no output: input tokens/s, the TTFT target bounding their whole "
              "latency)" if any(data.pools(a.group[R.output_length]) for a in found) else "")
    lines = [SECTION, "", f"Targets: {targets.describe()} ({origin}). Each answer is the configuration whose ok point "
             f"meeting every target has the most output tokens/s per GPU{pooled}; the runner-up is the next "
             "configuration's best such point, and the margin is beyond both intervals when the winner's 95% interval "
             "lies wholly above the runner-up's.", "",
             *data.table_head("| model | scenario | input | output | hardware | best configuration | at | tokens/s "
                              "per GPU (95% interval) | cost per M tokens | runner-up | its tokens/s per GPU | margin |",
                              6)]
    notes = []
    for a in found:
        g = a.group
        head = [str(g[R.model]), str(g[R.scenario]), str(g[R.input_length]), str(g[R.output_length]),
                str(g[R.hardware])]
        if a.best is None:
            lines.append("| " + " | ".join(head + ["none meets the targets", "-", "-", "-", "-", "-", "-"]) + " |")
            notes.append(f"- {sentence(a)}")
            continue
        runner = a.runner_up
        margin = {True: "beyond the intervals", False: "within: a tie", None: "-"}[a.margin_beyond_intervals]
        cells = [str(a.best[SERIES]), data.load_text(a.best), _per_gpu_text(a.best), fmt(a.best.get(
                 R.cost_per_million_output_tokens)), "-" if runner is None else f"{runner[SERIES]} at "
                 f"{data.load_text(runner)}", "-" if runner is None else fmt(per_gpu(runner)),
                 margin]
        lines.append("| " + " | ".join(head + cells) + " |")
    return lines + [""] + (notes + [""] if notes else [])


def _per_gpu_text(row: pd.Series) -> str:
    low, high = per_gpu_interval(row)
    interval = "" if math.isnan(low) or math.isnan(high) else f" ({fmt(low)}-{fmt(high)})"
    return fmt(per_gpu(row)) + interval


def _cost(row: pd.Series) -> str:
    cost = number(row, R.cost_per_million_output_tokens)
    return "" if math.isnan(cost) else f", {fmt(cost)} per million output tokens"


def _none_if_nan(value: float) -> Optional[float]:
    return None if math.isnan(value) else value


def _int(value: object) -> Optional[int]:
    found = pd.to_numeric(value, errors="coerce")
    return None if found is None or pd.isna(found) else int(found)


def best_output(sources: List[Path], series: Optional[List[str]], where: Optional[Dict[str, str]],
                overrides: Dict[str, Optional[float]], form: str) -> str:
    """`python -m plots RESULTS... --best`: the answer alone, as text or JSON, from the same rows the report reads."""
    from plots.best.targets import resolve

    table = data.results_table(sources, series, where)
    targets, origin = resolve(sources, overrides)
    if form == "json":
        return json.dumps(as_json(table, targets, origin), indent=2)
    return "\n".join(console_lines(table, targets, origin))


def html_section(table: pd.DataFrame, targets: Targets, origin: str) -> str:
    """report.html's panel: the same answers as report.md's section, one line each, before the charts."""
    import html

    items = "".join(f"<li>{html.escape(sentence(a))}</li>" for a in answers(table, targets))
    return (f'<section id="best"><h2>The best configuration at your targets</h2><p class="note">Targets: '
            f"{html.escape(targets.describe())} ({html.escape(origin)}). The most output tokens/s per GPU among the "
            f"points that meet every target; the runner-up is the next configuration.</p><ul>{items}</ul></section>")

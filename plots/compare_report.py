"""`python -m plots compare BASE NEW`: compare.md and a ratio chart per metric, and the exit code a CI gate reads.

    python -m plots compare BASE NEW [--threshold PCT] [--metric M ...] [--out DIR] [--fail-on-regression]
    python -m plots compare RESULTS --series BASE_ENTRY NEW_ENTRY ...

Exit codes: 0 compared (and, with --fail-on-regression, nothing slower); 1 some point slower with
--fail-on-regression; 2 bad input.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import List, Optional

import numpy as np

from harness.files import path_argument
from plots import style
from plots.compare import DEFAULT_METRICS, SAMPLED, Comparison, compare, describe_key, read_side
from plots.errors import PlotError

EXIT_REGRESSION = 1
REPORT_NAME = "compare.md"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise PlotError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m plots compare",
                     description="Compare two runs point by point: ratio, 95% interval, verdict.")
    parser.add_argument("results", nargs="+", type=path_argument, help="BASE NEW results folders, or one with --series")
    parser.add_argument("--series", nargs=2, metavar=("BASE", "NEW"),
                        help="compare two backend entries (their labels) of one results folder")
    parser.add_argument("--threshold", type=float, default=5.0,
                        help="percent: smaller changes are `same` however significant (default 5)")
    parser.add_argument("--metric", action="append", choices=list(SAMPLED),
                        help=f"repeatable (default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--out", type=path_argument, help="folder for compare.md and the charts (default: NEW/compare)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when any point is `slower` (points on one side only are listed, not failed)")
    return parser


def run(argv: List[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.series:
        if len(args.results) != 1:
            raise PlotError("--series compares two entries of one results folder: pass exactly one folder")
        folder = args.results[0]
        base, new = (read_side(folder, label, name=label) for label in args.series)
        out = args.out or _folder(folder) / "compare"
    else:
        if len(args.results) != 2:
            raise PlotError(f"compare: pass BASE and NEW results folders (got {len(args.results)}), or one folder "
                            "with --series BASE NEW")
        base, new = (read_side(path) for path in args.results)
        out = args.out or _folder(args.results[1]) / "compare"
    if not args.threshold >= 0:
        raise PlotError(f"--threshold: must be a percentage of 0 or more, got {args.threshold}")
    result = compare(base, new, args.metric or DEFAULT_METRICS, args.threshold / 100)
    if not result.verdicts:
        raise PlotError("no point is ok on both sides: nothing to compare"
                        + (f" ({'; '.join(result.missing[:5])})" if result.missing else ""))
    try:
        out.mkdir(parents=True, exist_ok=True)
        charts = [draw_ratios(result, metric, out) for metric in result.metrics]
        path = out / REPORT_NAME
        path.write_text(render(result, [c for c in charts if c]))
    except OSError as e:
        raise PlotError(f"{out}: cannot write the comparison ({e.strerror or e})") from None
    print(headline(result))
    print(f"comparison: {path}")
    return EXIT_REGRESSION if args.fail_on_regression and result.slower else 0


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def headline(result: Comparison) -> str:
    points = result.points()
    slower = {v.key for v in result.slower}
    faster = {v.key for v in result.verdicts if v.verdict == "faster"} - slower
    pct = f"{result.threshold:.0%}"
    return (f"{len(slower)} of {len(points)} points slower by more than {pct} on some metric; {len(faster)} faster; "
            f"{len(result.missing)} not on both sides")


def render(result: Comparison, charts: List[Path]) -> str:
    lines = [f"# Comparison: {result.new.name} vs {result.base.name}", "",
             f"**{headline(result)}.**", "",
             f"Ratio: new / base of the point's figure. Interval: 95%, delta method on the per-batch means with "
             f"Welch's degrees of freedom. Verdict: `faster` or `slower` only when the change exceeds "
             f"{result.threshold:.0%} and Welch's t-test on the per-batch samples gives p < 0.05; otherwise `same`. "
             "Sorted by the size of the change, largest first.", "",
             "| point | metric | base | new | ratio | 95% interval | p | verdict |",
             "|---|---|--:|--:|--:|--:|--:|---|"]
    for v in sorted(result.verdicts, key=lambda v: -abs(math.log(v.ratio))):
        interval = f"{v.ratio_low:.3f} – {v.ratio_high:.3f}" if v.ratio_low is not None else "-"
        p = f"{v.p_value:.2g}" if v.p_value is not None else "-"
        verdict = f"**{v.verdict}**" if v.verdict != "same" else v.verdict
        lines.append(f"| {describe_key(v.key)} | {v.metric} | {v.base:.4g} | {v.new:.4g} | {v.ratio:.3f} | "
                     f"{interval} | {p} | {verdict} |")
    lines.append("")
    if result.missing:
        lines += ["## Not compared (not ok on both sides)", "", *[f"- {m}" for m in result.missing], ""]
    for chart in charts:
        lines += [f"![{chart.stem}]({chart.name})", ""]
    return "\n".join(lines)


def draw_ratios(result: Comparison, metric: str, out: Path) -> Optional[Path]:
    """new / base per point with its interval: a panel per length pair, batch size on the x axis, the threshold
    band shaded around 1."""
    verdicts = [v for v in result.verdicts if v.metric == metric]
    if not verdicts:
        return None
    groups = sorted({v.key[:-3] + v.key[-2:] for v in verdicts}, key=lambda k: tuple(str(x) for x in k))
    fig, axes = style.new_grid(1, len(groups))
    colors = {"faster": "#2a9d58", "slower": "#d1495b", "same": "#555555"}
    for ax, group in zip(axes[0], groups):
        in_group = sorted((v for v in verdicts if v.key[:-3] + v.key[-2:] == group), key=lambda v: v.key[-3])
        x = np.array([v.key[-3] for v in in_group], dtype=float)
        y = np.array([v.ratio for v in in_group])
        low = np.array([v.ratio - v.ratio_low if v.ratio_low is not None else 0 for v in in_group])
        high = np.array([v.ratio_high - v.ratio if v.ratio_high is not None else 0 for v in in_group])
        ax.axhspan(1 - result.threshold, 1 + result.threshold, color="#dddddd", alpha=0.6, lw=0)
        ax.axhline(1.0, color="#888888", lw=1)
        for xi, yi, lo, hi, v in zip(x, y, low, high, in_group):
            ax.errorbar([xi], [yi], yerr=[[lo], [hi]], fmt="o", color=colors[v.verdict], capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(int(b)) for b in x])
        ax.minorticks_off()
        *head, input_length, output_length = group
        ax.set_title(f"{head[0] + ', ' if len(head) > 1 else ''}in {input_length} / out {output_length}", fontsize=10)
        ax.set_xlabel("batch size")
    lows = [v.ratio_low if v.ratio_low is not None else v.ratio for v in verdicts] + [1 - result.threshold]
    highs = [v.ratio_high if v.ratio_high is not None else v.ratio for v in verdicts] + [1 + result.threshold]
    margin = 0.05 * (max(highs) - min(lows))
    for ax in axes[0]:  # one scale for every panel, so their ratios read against each other
        ax.set_ylim(min(lows) - margin, max(highs) + margin)
    axes[0][0].set_ylabel(f"{metric}: new / base")
    fig.suptitle(f"{metric}: {result.new.name} vs {result.base.name} (band: ±{result.threshold:.0%})", fontsize=11)
    return style.save(fig, out, f"compare_{metric}", ("png",))[0]

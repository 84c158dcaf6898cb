"""`python -m plots RESULTS... [--out DIR] [--series COLS] [--where key=value ...] [--slo-tpot-ms MS]
[--format png,svg]`.

`python -m plots compare BASE NEW ...` compares two runs instead (plots/compare_report.py).
Exit codes: 0 report written; 2 bad input (one `error:` line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import List, Optional

from plots import data
from harness.errors import UserError
from harness.files import path_argument
from plots.errors import PlotError
from plots.report import FORMATS, make_report

EXIT_BAD_INPUT = 2
EPILOG = """\
With several RESULTS, --out is required: no one results folder owns the comparison.

examples:
  python -m plots results/a100 results/h100 --out results/compare    # one curve per hardware
  python -m plots results/run --series backend,tp_size --where input_length=512 --format png,svg
  python -m plots compare results/before results/after --fail-on-regression   # exit 1 if a point is slower

exit codes: 0 report written; 1 compare --fail-on-regression found a slower point; 2 bad input (one error: line)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors, in the same one-line shape
        raise PlotError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m plots", usage="%(prog)s RESULTS... [options]\n       %(prog)s compare BASE NEW "
                     "[options]   (see python -m plots compare --help)",
                     description="Charts and report.md from results folders (RESULTS/plots for one folder); or, with "
                     "`compare`, whether two runs differ point by point (compare.md, a ratio chart per metric, "
                     "--fail-on-regression for a CI gate).",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=path_argument, help="results folders or results.csv files")
    parser.add_argument("--out", type=path_argument, help="output folder (default: RESULTS/plots for one results "
                                                          "folder)")
    parser.add_argument("--series", help="comma-separated columns naming a curve (default: "
                        f"{','.join(data.DEFAULT_SERIES_COLUMNS)}); choose from {','.join(data.SERIES_CHOICES)}")
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="keep rows whose column KEY equals VALUE (VALUE may be a,b for either); repeatable")
    parser.add_argument("--slo-tpot-ms", type=_positive_ms, metavar="MS",
                        help="a TPOT target: the per-GPU vs per-user chart draws it as a line at 1000/MS tokens/s "
                        "(default: the stream points' own slo_tpot_ms, when they share one)")
    parser.add_argument("--format", default="png", help=f"comma-separated, from {','.join(FORMATS)} (default png)")
    return parser


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of milliseconds above 0, got {text!r}")
    return value


def default_out_dir(results: List[Path]) -> Path:
    if len(results) > 1:
        raise PlotError("several results given: pass --out DIR for the comparison's charts and report")
    source = results[0]
    return (source if source.is_dir() else source.parent) / "plots"


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:  # a results folder named `compare` is ./compare
        return _compare(argv[1:])
    try:
        args = build_parser().parse_args(argv)
        series = [c.strip() for c in args.series.split(",") if c.strip()] if args.series is not None else None
        out_dir = args.out or default_out_dir(args.results)
        report = make_report(args.results, out_dir, series, data.parse_where(args.where),
                             tuple(args.format.split(",")), args.slo_tpot_ms)
    except (PlotError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"charts and report: {report}")
    return 0


def _compare(argv: List[str]) -> int:
    from plots.compare_report import run

    try:
        return run(argv)
    except (PlotError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

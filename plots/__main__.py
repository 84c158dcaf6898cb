"""`python -m plots RESULTS... [--out DIR] [--series COLS] [--where key=value ...] [--slo-tpot-ms MS]
[--format png,svg] [--html-standalone] [target flags]`, or
`python -m plots RESULTS... --best [target flags] [--format text|json]`.

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
from plots.best.render import best_output
from plots.best.targets import PERCENTILES
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
  python -m plots results/a100 results/h100 --best --tpot-ms 50 --ttft-ms 2000 --format json
  python -m plots results/run --out /tmp/share --html-standalone    # /tmp/share/report.html: one file to send

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
    # The choices joined with spaces: argparse wraps help at spaces, and one long word would be cut mid-name.
    parser.add_argument("--series", help="comma-separated columns naming a curve (default: "
                        f"{','.join(data.DEFAULT_SERIES_COLUMNS)}); choose from {', '.join(data.SERIES_CHOICES)}")
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="keep rows whose column KEY equals VALUE (VALUE may be a,b for either); repeatable")
    parser.add_argument("--slo-tpot-ms", type=_positive("ms"), metavar="MS",
                        help="a TPOT target: the per-GPU vs per-user chart draws it as a line at 1000/MS tokens/s "
                        "(default: the stream points' own slo_tpot_ms, when they share one)")
    parser.add_argument("--format", default=None, help=f"comma-separated, from {','.join(FORMATS)} (default png); "
                        "with --best: text (default) or json")
    parser.add_argument("--html-standalone", action="store_true", help="report.html with plotly.js inside it: one "
                        "file (about 5 MB) to attach or mail, no plotly.min.js beside it")
    track = parser.add_argument_group("experiment trackers (docs/guides/tracking.md)")
    track.add_argument("--track", action="store_true", help="send each results folder to the trackers its sweep "
                       "named (config.yaml's tracking), continuing its runs: what a sweep with a tracker that was down "
                       "did not send, or a folder made without one")
    track.add_argument("--mlflow-uri", metavar="URI", help="with --track: the MLflow tracking server to send to")
    track.add_argument("--wandb-project", metavar="NAME", help="with --track: the W&B project to send to")
    track.add_argument("--wandb-mode", choices=("online", "offline"), help="with --track: W&B's mode")
    best = parser.add_argument_group("the best configuration at your targets (report.md's first section; --best "
                                     "prints it alone). Each flag overrides the sweep's own `target`")
    best.add_argument("--best", action="store_true", help="print the best configuration at the targets, per model, "
                      "scenario, length pair and hardware, instead of writing the report")
    for flag, unit, what in TARGET_FLAGS:
        best.add_argument(f"--{flag}", type=_positive(unit), metavar=unit.upper().replace(" ", "_"), help=what)
    best.add_argument("--percentile", type=_percentile, help="the percentile --ttft-ms and --tpot-ms hold "
                      f"({', '.join(map(str, PERCENTILES))}; default 99)")
    return parser


TARGET_FLAGS = (("ttft-ms", "ms", "time to first token at the percentile, at most"),
                ("tpot-ms", "ms", "time per output token at the percentile, at most"),
                ("min-user-tokens-per-s", "tokens/s", "output tokens/s one user sees, at least"),
                ("max-cost-per-m-tokens", "cost", "cost per million output tokens, at most (needs "
                 "hardware.cost_per_hour)"),
                ("max-accuracy-drop", "share", "accuracy at most this far below its reference (where measured)"))


def _positive(unit: str):
    """An argparse type: a finite number above 0 in `unit`, else one line saying so."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"must be a finite number ({unit}) above 0, got {text!r}")
        return value
    return parse


def _percentile(text: str) -> int:
    if text.strip() not in {str(p) for p in PERCENTILES}:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(map(str, PERCENTILES))}, got {text!r}")
    return int(text)


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
        targets = {flag.replace("-", "_"): getattr(args, flag.replace("-", "_")) for flag, _, _ in TARGET_FLAGS}
        targets["percentile"] = args.percentile
        if args.track or args.mlflow_uri or args.wandb_project or args.wandb_mode:
            return _track(args)
        if args.best:
            form = args.format or "text"
            if form not in ("text", "json"):
                raise PlotError(f"--format {form}: with --best, choose text or json")
            print(best_output(args.results, series, data.parse_where(args.where), targets, form))
            return 0
        out_dir = args.out or default_out_dir(args.results)
        report = make_report(args.results, out_dir, series, data.parse_where(args.where),
                             tuple((args.format or "png").split(",")), args.slo_tpot_ms, targets,
                             args.html_standalone)
    except (PlotError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"charts and report: {report}")
    return 0


def _track(args: argparse.Namespace) -> int:
    """`--track`: each folder sent; 0 when every tracker took it, 1 when one failed (its line says why)."""
    from harness.track.sync import FolderTracking, folder_tracking_config

    if not args.track:
        raise PlotError("--mlflow-uri, --wandb-project and --wandb-mode go with --track")
    failed = False
    for folder in args.results:
        if not (folder / "results.csv").is_file():
            raise PlotError(f"--track: {folder} is not a results folder (no results.csv)")
        config = folder_tracking_config(folder, args.mlflow_uri, args.wandb_project, args.wandb_mode)
        tracking = FolderTracking(folder, config)
        for line in tracking.finish():
            print(f"warning: {line}", file=sys.stderr)
        for name, outcome in tracking.record().items():
            failed |= outcome["result"] != "sent"
            if outcome["result"] == "sent":
                print(f"{folder}: tracked in {name}: {outcome['where']}")
    return 1 if failed else 0


def _compare(argv: List[str]) -> int:
    from plots.compare_report import run

    try:
        return run(argv)
    except (PlotError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

"""`python benchmark.py CONFIG.yaml [key=value ...]`: parse, then plan, run, launch remotely or collect.

Exit codes: 0 every point ok, oom or skipped; 1 a point errored (results still written);
2 bad config or command line (one `error:` line, no traceback); 130 interrupted (Ctrl-C),
with every finished point kept.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import List, Optional, Set, Tuple

from app.accuracy import with_accuracy
from app.console import console, print_plan
from app.remote import RESULTS_ROOT, collect, collect_slurm, launch_remote, launch_slurm
from app.plan_output import FORMATS, print_dry_run_floors, show_plan
from app.resume import check_resumable
from app.session import SweepOptions, run_sweep
from backends.registry import BACKENDS, engine_distributions
from harness.config import schema
from harness.config.grid import MAX_GRID_ENTRIES
from harness.config.sweep import SweepConfig, load_config, model_sections
from harness.errors import UserError
from harness.fields import WEEK_S
from harness.files import path_argument, writable_folder
from harness.measure.columns.base import POINT_KEY
from harness.measure.columns.readback import once_per_point, read_back
from harness.measure.columns.results import RESULTS
from harness.measure.records import PointKey
from harness.measure.writers import ResultsDir
from harness.model.drafts import check_drafts
from harness.model.hardware import Machine, planning_for
from harness.model.spec import ModelSpec, resolve_models
from harness.plan.forecast import calibrate
from harness.plan.sweep import plan_sweep
from harness.run.cluster import open_control
from harness.run.worker import quiet_import_noise
from workloads.base import Workload
from workloads.registry import WORKLOADS, build_workload

SCHEDULER_NODES = 4096  # room for any entry until each template's job is checked against its own nodes
AGENT_JOIN_TIMEOUT_S = 600.0
MAX_NOTES = 5  # damaged rows said one by one on resume; past these, counted  # an agent may start well before node 0 has planned and opened its rendezvous


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UserError(message)


USAGE_EXAMPLES = """\
examples:
  python benchmark.py yamls/cpu-tiny.yaml                    # the CPU demo: a tiny model on every engine
  python benchmark.py yamls/cpu-tiny.yaml batch_sizes=[1,8] num_batches=3
  python benchmark.py yamls/my-model.yaml model.name_or_path=DIR --plan    # your model: does it fit?
  python benchmark.py yamls/70b.yaml --plan hardware.gpu=h100-sxm hardware.num_gpus=8
  python benchmark.py yamls/7b.yaml --plan --calibrate results/RUN hardware.gpu=h100-sxm   # forecast from results
  python benchmark.py yamls/7b.yaml --dry-run                # every point, its memory estimate, runs here?
  python benchmark.py yamls/7b.yaml --output-dir results/a100 --resume     # finish an interrupted sweep
  python benchmark.py --schema backends.vllm                 # a section's keys: type, default, help
  python -m plots results/RUN                                # redraw; python -m plots compare BASE NEW

exit codes:
  0    every point ended ok, oom or skipped
  1    a point errored (every result is still written)
  2    bad config, input or command line: one `error:` line naming the key
  130  interrupted (Ctrl-C): finished points are kept; rerun with --output-dir DIR --resume

Every config key: python benchmark.py --schema [SECTION]. The docs: docs/ (make docs serves them).
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line, grouped by what a user does: run a sweep, look before running, launch on a scheduler,
    join a multi-node sweep. docs/reference/cli.md is generated from its help."""
    parser = _Parser(prog="benchmark.py", description="Sweep LLM inference latency and throughput from a YAML.",
                     epilog=USAGE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", help="sweep YAML, e.g. yamls/cpu-tiny.yaml")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="dotlist overrides, e.g. batch_sizes=[1,8] model.dtype=fp32 backends.0.device=cpu; "
                        "model.name_or_path=DIR (or model.preset=NAME) replaces the YAML's other model source")
    run = parser.add_argument_group("running a sweep")
    run.add_argument("--output-dir", type=path_argument, metavar="DIR",
                     help="results folder (default: results/<benchmark_name>-<time>/)")
    run.add_argument("--resume", action="store_true", help="continue a sweep in --output-dir, skipping done points")
    run.add_argument("--no-plots", action="store_true", help="skip drawing charts at the end of the sweep")
    run.add_argument("--yes", action="store_true", help="run a backend entry's grid even when it makes more than "
                     f"{MAX_GRID_ENTRIES} entries (without it, that is a config error)")
    look = parser.add_argument_group("looking before running (nothing is loaded)")
    look.add_argument("--dry-run", action="store_true", help="print every point with its memory estimate and "
                      "whether it runs here, and exit")
    look.add_argument("--plan", action="store_true",
                      help="print the largest batch that fits per entry and lengths (by the estimate), and each "
                      "point's roofline floors, and exit; with hardware.gpu=NAME hardware.num_gpus=N, on that machine "
                      "instead of this one")
    look.add_argument("--calibrate", nargs="+", action="extend", type=path_argument, metavar="DIR",
                      help="with --plan: forecast TTFT, TPOT and throughput from the fraction of the roofline floor "
                      "each engine reached in these results folders (docs/guides/forecast.md)")
    look.add_argument("--format", choices=FORMATS, default="text",
                      help="with --plan: text tables, or json (one JSON line per entry, lengths and batch size)")
    look.add_argument("--charts", type=path_argument, metavar="DIR", help="with --plan: draw the forecast's and "
            "floors' "
                      "per-GPU vs per-user and latency vs throughput charts (PNG) into DIR")
    look.add_argument("--schema", nargs="?", const="", metavar="SECTION",
                      help="print every config key (type, default, help) and exit; SECTION narrows it, e.g. model, "
                      "stream, backends.vllm, backends (all of them), workload.prompts")
    look.add_argument("--translate-only", action="store_true",
                      help="llm-foundry inference-benchmark YAML: print its translation into this harness's YAML "
                      "(mapping as comments) and exit")
    _remote_and_node_arguments(parser)
    return parser


def _remote_and_node_arguments(parser: argparse.ArgumentParser) -> None:
    """The schedulers' flags and the other nodes' agents' flags."""
    remote = parser.add_argument_group("schedulers: MosaicML platform (--mcli) and Slurm (--slurm)")
    remote.add_argument("--mcli", action="append", type=path_argument, metavar="TEMPLATE",
                        help="build a platform run from this compute template (repeatable); prints it unless --submit")
    remote.add_argument("--slurm", action="append", type=path_argument, metavar="TEMPLATE",
                        help="build an sbatch script from this Slurm template (repeatable); prints it unless --submit")
    remote.add_argument("--submit", action="store_true", help="with --mcli: submit the runs; with --slurm: sbatch "
                        "the scripts")
    remote.add_argument("--collect", nargs="+", metavar="RUN",
                        help="rebuild results folders from platform runs' logs, or bring Slurm jobs' results home "
                        "(job ids)")
    remote.add_argument("--emit-log-markers", action="store_true",
                        help="print rows and files into the log between markers (what platform runs do)")
    nodes = parser.add_argument_group("more than one node: the other nodes' agents")
    nodes.add_argument("--node-agent", metavar="HOST:PORT",
                       help="run as another node's agent: join node 0's cluster.rendezvous and start this node's "
                       "ranks of each entry that spans it, until node 0's sweep ends")
    nodes.add_argument("--node-rank", type=int, metavar="K", help="with --node-agent: this node's number, 1 or more "
                       "(default: SLURM_NODEID or NODE_RANK)")
    nodes.add_argument("--log-dir", type=path_argument, metavar="DIR", help="with --node-agent: write this node's "
            "ranks' "
                       "output there (default: the agent's own output)")
    nodes.add_argument("--join-timeout-s", type=_seconds, metavar="S", help="with --node-agent: how long to wait for "
                       f"node 0's rendezvous to open (default {AGENT_JOIN_TIMEOUT_S:.0f})")


def _seconds(text: str) -> float:
    """A timeout on the command line: a finite number of seconds above 0 (at most a week, as the config's)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= WEEK_S:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds in (0, {WEEK_S}], got {text!r}")
    return value


def parse_args(argv: List[str]) -> argparse.Namespace:
    args = build_parser().parse_intermixed_args(argv)
    # --calibrate takes every word after it: the key=value overrides among them are overrides, not folders.
    args.overrides += [str(p) for p in args.calibrate or () if _is_override(p)]
    args.calibrate = [p for p in args.calibrate or () if not _is_override(p)] or None
    _check_modes(args)
    return args


def _is_override(word: Path) -> bool:
    """A word after --calibrate that is a key=value override, not a folder (a folder may have `=` in its name)."""
    return "=" in word.name and not word.is_dir()


def _check_modes(args: argparse.Namespace) -> None:
    if args.node_agent is not None:
        if args.config or args.collect or args.mcli or args.slurm or args.schema is not None:
            raise UserError("--node-agent: takes --node-rank, --log-dir and --join-timeout-s only; node 0 runs the "
                            "CONFIG")
        return
    if args.node_rank is not None or args.log_dir is not None or args.join_timeout_s is not None:
        raise UserError("--node-rank, --log-dir, --join-timeout-s: only with --node-agent HOST:PORT")
    if args.schema is not None:
        if args.config or args.collect or args.mcli or args.slurm:
            raise UserError("--schema: takes an optional SECTION only, no CONFIG, --collect, --mcli or --slurm")
        return
    if args.collect and (args.config or args.mcli or args.slurm):
        raise UserError("--collect: takes run names or Slurm job ids only, no CONFIG, --mcli or --slurm")
    if args.collect and len({name.isdigit() for name in args.collect}) > 1:
        raise UserError("--collect: give platform run names or Slurm job ids (numbers), not both at once")
    if not args.collect and not args.config:
        raise UserError("CONFIG: required, e.g. python benchmark.py yamls/cpu-tiny.yaml")
    if args.mcli and args.slurm:
        raise UserError("--mcli, --slurm: one scheduler per command")
    if args.submit and not (args.mcli or args.slurm):
        raise UserError("--submit: needs at least one --mcli or --slurm TEMPLATE")
    if (args.calibrate or args.charts or args.format != "text") and not args.plan:
        raise UserError("--calibrate, --charts, --format: only with --plan")
    if args.resume and not args.output_dir:
        raise UserError("--resume: needs --output-dir DIR, the folder of the sweep to continue")


# transformers reads this once, when it is first imported: set while this process plans, its config classes' own
# warnings about a config (a token id past the vocabulary, a deprecated field) stay out of the one-line answers; the
# workers, started after it is unset, keep transformers' default in their logs.
TRANSFORMERS_QUIET = ("TRANSFORMERS_VERBOSITY", "error")


def main(argv: Optional[List[str]] = None) -> int:
    quiet_import_noise()
    quiet = TRANSFORMERS_QUIET[0] not in os.environ
    if quiet:
        os.environ[TRANSFORMERS_QUIET[0]] = TRANSFORMERS_QUIET[1]
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:
        if quiet:
            os.environ.pop(TRANSFORMERS_QUIET[0], None)


def _main(argv: List[str]) -> int:
    try:
        args = parse_args(argv)
        if args.schema is not None:
            print(schema.render(schema.select(schema.sections(BACKENDS, WORKLOADS), args.schema)))
            return 0
        if args.collect:
            if args.collect[0].isdigit():
                return collect_slurm(args.collect, args.output_dir or RESULTS_ROOT)
            return collect(args.collect, args.output_dir or RESULTS_ROOT)
        if args.node_agent is not None:
            from harness.run.node_agent import run_agent

            timeout_s = AGENT_JOIN_TIMEOUT_S if args.join_timeout_s is None else args.join_timeout_s
            return run_agent(args.node_agent, args.node_rank, timeout_s, args.log_dir)
        from app import foundry  # llm-foundry's YAMLs run unchanged: translated first, then loaded as ours

        translated = None
        if args.translate_only or foundry.is_foundry_file(args.config):
            translated = foundry.translate_for_cli(args.config, args.overrides, args.translate_only)
            if translated is None:
                return 0
        config = load_config(args.config, args.overrides + scheduler_overrides(args), BACKENDS, WORKLOADS,
                             raw=translated, large_grids=args.yes)
        models = models_of(config)
        if args.mcli:
            return launch_remote(config, models, args.mcli, args.submit)
        if args.slurm:
            return launch_slurm(config, args.slurm, args.submit)
        machine = planned_machine_of(config) if (args.plan or args.dry_run) else None
        if args.plan:
            return show_plan_of(args, config, models, machine)
        with planning_for(machine):
            plans = [plan for model, workload in models
                     for plan in with_accuracy(plan_sweep(config, model, BACKENDS, workload), config, model)]
        if args.dry_run:
            print_plan(plans)
            print_dry_run_floors(config, plans, machine, console)
            return 0
        out, done, previous = open_results(args, config)
        control = open_control(config.cluster, plans, out.path / "logs")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.environ.pop(TRANSFORMERS_QUIET[0], None)  # the workers' logs keep transformers' own warnings
    options = SweepOptions(argv, plots=not args.no_plots, control=control, engine_distributions=engine_distributions())
    if args.emit_log_markers:
        from harness.measure.logmarkers import LogMarkers

        options.observer = LogMarkers()
    if config.tracking.any:  # docs/guides/tracking.md
        from app.tracking import Observers, TrackingObserver

        try:
            options.observer = Observers(options.observer, TrackingObserver(config.tracking, out.path))
        except UserError as e:  # a damaged tracking.json: which runs to continue is not known
            print(f"error: {e}", file=sys.stderr)
            return 2
    return run_sweep(config, plans, out, done, previous, options)


def show_plan_of(args: argparse.Namespace, config: SweepConfig, models: List[Tuple[ModelSpec, Workload]],
                 machine: Optional[Machine]) -> int:
    """`--plan`: the capacity tables and floors, a forecast from --calibrate's folders, charts into --charts."""
    if args.charts is not None:
        writable_folder(args.charts, "--charts")
    calibration = calibrate(args.calibrate, read_results_csv) if args.calibrate else None
    with planning_for(machine):
        show_plan(config, models, machine, calibration, args.format, args.charts, console)
    return 0


def open_results(args: argparse.Namespace, config: SweepConfig) -> Tuple[ResultsDir, Set[PointKey], dict]:
    """The results folder, its points already done and its previous manifest. A resumed folder is checked against
    this config before anything in it changes; then its damaged rows are set aside, each said on one line."""
    out = ResultsDir(args.output_dir or default_output_dir(config))
    if args.resume and not (out.manifest_json.exists() or out.manifest_json.is_symlink()):
        if out.has_results():
            raise UserError(f"--resume: {out.path} holds results but no manifest.json, so what its rows were measured "
                            "with is unknown; use a new --output-dir")
        raise UserError(f"--resume: {out.path} holds no sweep to continue (no manifest.json); leave out --resume to "
                        "start one there")
    previous = out.read_manifest() if args.resume or out.manifest_json.exists() else {}
    check_resumable(previous, config, out.path)
    done = out.open(args.resume)
    for note in out.set_aside[:MAX_NOTES]:  # a cut write's partial row, kept aside as found
        print(f"warning: --resume: {note}", file=sys.stderr)  # one line, however long: not wrapped
    if len(out.set_aside) > MAX_NOTES:
        print(f"warning: --resume: {len(out.set_aside) - MAX_NOTES} more damaged rows set aside (the .damaged files "
              "hold each, after a line saying where it was)", file=sys.stderr)
    return out, done, previous


def read_results_csv(path: Path) -> Tuple[Optional[List[str]], List[dict]]:
    """A results.csv's header and sound rows for --calibrate; each damaged row said on stderr and left out."""
    found = once_per_point(read_back(path, RESULTS), POINT_KEY)
    for message in found.messages():
        print(f"warning: --calibrate: {message}; left out", file=sys.stderr)
    return found.header, found.rows


def models_of(config: SweepConfig) -> List[Tuple[ModelSpec, Workload]]:
    """Each model of the sweep (`model`, or each of `models`) with its workload: a prompt file is tokenized by each
    model's own tokenizer. Drafts are checked against each."""
    pairs = []
    for model in resolve_models(model_sections(config)):
        check_drafts(config, model)
        pairs.append((model, build_workload(config, model)))
    return pairs


def planned_machine_of(config: SweepConfig) -> Optional[Machine]:
    """The machine `--plan` and `--dry-run` plan for: `hardware.gpu` x `hardware.num_gpus` (default 1), else None
    (this one)."""
    hardware = config.hardware
    return Machine(hardware.gpu, hardware.num_gpus or 1) if hardware.gpu else None


def default_output_dir(config: SweepConfig) -> Path:
    return RESULTS_ROOT / f"{config.benchmark_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def scheduler_overrides(args: argparse.Namespace) -> List[str]:
    """Under --slurm or --mcli each template's job has a `cluster` of its own nodes, checked against every entry's
    where the job is built (naming the template: harness/config/cluster.py, job_cluster). The sweep loads with room
    for any entry until then."""
    return [f"cluster.nodes={SCHEDULER_NODES}"] if args.slurm or args.mcli else []

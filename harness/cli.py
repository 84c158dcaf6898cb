"""`python benchmark.py CONFIG.yaml [key=value ...]`: parse, plan, run, report.

Exit codes: 0 every point ok, oom or skipped; 1 a point errored (results still written);
2 bad config or command line (one `error:` line, no traceback); 130 interrupted (Ctrl-C),
with every finished point kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import List, Optional

from harness.config import SweepConfig, load_config, to_plain
from harness.console import SweepProgress, console, print_plan, print_summary, warn_unavailable
from harness.errors import UserError
from harness.manifest import build_manifest, hardware_label, now_iso
from harness.models import ModelSpec, check_lengths, resolve_model
from harness.records import PointResult, RunContext, point_key
from harness.launcher import run_in_worker
from harness.runner import EntryRunner, RunEvents
from harness.sweep import EntryPlan, plan_sweep
from harness.worker import WorkerJob
from harness.writers import ResultsDir, read_rows, result_row

RESULTS_ROOT = Path(__file__).resolve().parent.parent / "results"
# Keys whose change makes earlier rows incomparable with new ones.
RESUME_KEYS = ("benchmark_name", "model", "num_batches", "num_warmup_batches", "seed")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UserError(message)


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = _Parser(prog="benchmark.py", description="Sweep LLM inference latency and throughput from a YAML.")
    parser.add_argument("config", help="sweep YAML, e.g. yamls/cpu-tiny.yaml")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="dotlist overrides, e.g. batch_sizes=[1,8] model.dtype=fp32 backends.0.device=cpu")
    parser.add_argument("--output-dir", type=Path, help="results folder (default: results/<benchmark_name>-<time>/)")
    parser.add_argument("--resume", action="store_true", help="continue a sweep in --output-dir, skipping done points")
    parser.add_argument("--dry-run", action="store_true", help="print the plan with memory estimates and exit")
    return parser.parse_intermixed_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        config = load_config(args.config, args.overrides)
        model = resolve_model(config.model)
        check_lengths(config, model)
        plans = plan_sweep(config, model)
        if args.dry_run:
            print_plan(plans)
            return 0
        out = ResultsDir(args.output_dir or default_output_dir(config))
        if args.resume and not args.output_dir:
            raise UserError("--resume: needs --output-dir DIR, the folder of the sweep to continue")
        done = out.open(args.resume)
        previous = out.read_manifest()
        check_resumable(previous, config, out.path)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return run_sweep(config, model, plans, out, done, previous, argv)


def default_output_dir(config: SweepConfig) -> Path:
    return RESULTS_ROOT / f"{config.benchmark_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_resumable(previous: dict, config: SweepConfig, path: Path) -> None:
    """Refuse to mix rows measured under a different model, seed or batch count into one folder."""
    if not previous:
        return
    now = to_plain(config)
    for key in RESUME_KEYS:
        if previous["config"].get(key) != now[key]:
            raise UserError(f"--resume: {path} was measured with {key}={previous['config'].get(key)!r}, "
                            f"this config has {now[key]!r}; use a new --output-dir")


def run_sweep(config: SweepConfig, model: ModelSpec, plans: List[EntryPlan], out: ResultsDir, done: set,
              previous: dict, argv: List[str]) -> int:
    manifest = build_manifest(to_plain(config), ["benchmark.py", *argv], _model_info(model),
                              [_entry_info(p) for p in plans])
    if previous:
        manifest["previous_runs"] = previous.pop("previous_runs", []) + [previous]
    out.write_manifest(manifest)
    warn_unavailable(plans)
    todo = sum(point_key(p.label, pp.point) not in done for p in plans for pp in p.points)
    statuses: List[str] = []
    interrupted = False
    with SweepProgress(todo) as progress:
        def emit(result: PointResult) -> None:
            out.write_point(result)
            statuses.append(result.status)
            progress.point_done(result_row(result))

        try:
            for plan, entry in zip(plans, manifest["backends"]):
                entry["runtime"] = run_entry(plan, model, config, done, emit, out)
                out.write_manifest(manifest)
        except KeyboardInterrupt:
            interrupted = True
    manifest.update(end_time=now_iso(), interrupted=interrupted)
    out.write_manifest(manifest)
    print_summary(read_rows(out.results_csv))
    console.print(f"Results in {out.path}/ (results.csv, samples.csv, manifest.json)")
    if interrupted:
        console.print("Interrupted: finished points are saved; rerun with --resume --output-dir to complete.")
        return 130
    return 1 if "error" in statuses else 0


def run_entry(plan: EntryPlan, model: ModelSpec, config: SweepConfig, done: set, emit, out: ResultsDir) -> dict:
    """In a worker process when there is something to run; in-process when every point is skipped anyway."""
    context = run_context(config, model, plan)
    runnable = [pp for pp in plan.points if pp.skip_reason is None and point_key(plan.label, pp.point) not in done]
    if not runnable:
        EntryRunner(plan, model, config, context, RunEvents(emit)).run(done)
        return {}
    job = WorkerJob(plan, model, config, context, done, socket_path="")
    return run_in_worker(job, emit, out.path / "logs" / f"{plan.label}.log", config.load_timeout_s,
                         config.point_timeout_s)


def run_context(config: SweepConfig, model: ModelSpec, plan: EntryPlan) -> RunContext:
    placement = plan.placement
    return RunContext(config.benchmark_name, plan.label, model.name, model.dtype, hardware_label(placement.device),
                      placement.num_devices, placement.tp_size)


def _model_info(model: ModelSpec) -> dict:
    return {"name": model.name, "source": model.source, "weights": model.weights, "dtype": model.dtype,
            "num_params": model.num_params, "config": model.hf_config.to_diff_dict()}


def _entry_info(plan: EntryPlan) -> dict:
    return {"label": plan.label, "options": dataclasses.asdict(plan.options),
            "placement": dataclasses.asdict(plan.placement), "memory_budget_bytes": plan.budget_bytes}

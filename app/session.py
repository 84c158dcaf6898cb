"""One sweep, start to finish: manifest, one worker per backend entry, rows as they come, summary, charts.

The parent process owns every file of the results folder; workers only send records back.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from app.console import (
    SweepProgress,
    console,
    print_destinations,
    print_summary,
    print_time_budget,
    warn_unavailable,
)
from harness.config.speculative import baselines as spec_baselines
from harness.config.sweep import SweepConfig, to_plain
from harness.measure.annotations import PointAnnotations
from harness.measure.crosscheck import TokenCrossCheck
from harness.measure.explain import PointExplainer
from harness.measure.manifest import build_manifest, hardware_label, now_iso, reproduce_command
from harness.measure.quality import QualityCheck
from harness.measure.records import PointResult, RunContext, point_key
from harness.measure.spec_baseline import BaselineComparison
from harness.measure.sink import PointSink
from harness.measure.writers import ResultsDir, read_rows, safe_file_name
from harness.model.hardware import entry_peaks
from harness.model.roofline import Shape
from harness.model.spec import ModelSpec, architecture
from harness.plan.entry import EntryPlan
from harness.run.cluster import NodeControl
from harness.run.launcher import WorkerRun
from harness.run.preload import WorkerStarter
from harness.run.runner import EntryRunner, RunEvents
from harness.run.time_budget import process_age_s, sweep_budget
from harness.run.wait_notices import WaitNotices
from harness.run.worker import WorkerJob

PEAKS_CACHE = "hardware_peaks.json"  # the CPU probe's figures, per dtype (harness/model/hardware.py)
PROBES_DIR = "probes"  # the reference entries' logits probes, for a resumed sweep (harness/measure/quality.py)


class SweepObserver(Protocol):
    """Hooks a launcher adds to a sweep (a platform run prints rows into its log); the core knows no platform, so an
    observer of the library's (harness/measure/logmarkers.py) has them without naming this class. Each does nothing
    here (`return None`, not abstract): `Unobserved` inherits them."""

    def started(self, out: ResultsDir) -> None:
        """The results folder exists and holds the manifest."""
        return None

    def point_written(self) -> None:
        """A point's rows were appended to the CSVs."""
        return None

    def finished(self) -> None:
        """The sweep ended: every file is complete."""
        return None


class Unobserved(SweepObserver):
    """A sweep no launcher watches."""


@dataclasses.dataclass
class SweepOptions:
    argv: List[str]
    plots: bool = True
    observer: SweepObserver = dataclasses.field(default_factory=Unobserved)
    control: Optional[NodeControl] = None  # node 0's rendezvous, where an entry spans several nodes (closed at the end)
    # The registered engines' distributions, whose versions the manifest records (backends/registry.py)
    engine_distributions: Tuple[str, ...] = ()


def run_sweep(config: SweepConfig, plans: List[EntryPlan], out: ResultsDir, done: set, previous: dict,
              options: SweepOptions) -> int:
    """`plans` holds every (model, backend entry) pair, a model's entries together (harness/plan/sweep.py)."""
    startup_s = process_age_s()
    groups = model_groups(plans)
    manifest = start_manifest(config, plans, groups, options, previous)
    baselines = spec_baselines([p.options for p in groups[0][1]])  # the same entries for every model
    started = time.monotonic()
    sink = PointSink(out, model_annotations(groups, manifest, config, out, done, baselines))
    peaks_s = time.monotonic() - started
    if baselines:
        manifest["speculative_baselines"] = {k: v or "none: no entry of the same engine and options without "
                                             "speculative" for k, v in baselines.items()}
    config_yaml = out.write_config(to_plain(config))
    manifest["reproduce"] = reproduce_command(manifest["git_commit"], config_yaml)
    if str(manifest["git_commit"]).endswith("-dirty"):
        manifest["reproduce_note"] = "the working tree had uncommitted changes: the commit alone does not rerun it"
    out.write_manifest(manifest)
    options.observer.started(out)
    warn_unavailable(plans)
    print_destinations(plans)
    statuses, interrupted = [], False
    todo = sum(point_key(p.model.label, p.label, pp.point) not in done for p in plans for pp in p.points)
    with SweepProgress(todo, several_models=len(groups) > 1) as progress:
        def emit(result: PointResult) -> None:
            """A finished point becomes its row once (the sink), then is shown and counted."""
            row = sink.accept(result)
            statuses.append(result.status)
            progress.point_done(row)
            options.observer.point_written()

        try:
            run_entries(plans, manifest, config, done, emit, out, progress.note, options.control)
        except KeyboardInterrupt:
            interrupted = True
    finish_manifest(manifest, out, options, startup_s, peaks_s, interrupted)
    if config.output.upload_uri:
        upload(out.path, config.output.upload_uri)
    if interrupted:
        console.print("Interrupted: finished points are saved; rerun with --resume --output-dir to complete.")
        return 130
    return 1 if "error" in statuses else 0


def start_manifest(config: SweepConfig, plans: List[EntryPlan], groups: List[Tuple[ModelSpec, List[EntryPlan]]],
                   options: SweepOptions, previous: dict) -> dict:
    """What is known before anything runs: config, command, models (one section each when there are several),
    entries, and the runs a resumed sweep continues."""
    entries = [_entry_info(p, len(groups) > 1) for p in plans]
    manifest = build_manifest(to_plain(config), ["benchmark.py", *options.argv], _model_info(groups[0][0]),
                              entries, options.engine_distributions)
    if len(groups) > 1:  # what is said of one model is said in its own section
        manifest["models"] = [_model_info(model) for model, _ in groups]
        del manifest["model"]
    if previous:
        manifest["previous_runs"] = previous.pop("previous_runs", []) + [previous]
    return manifest


def finish_manifest(manifest: dict, out: ResultsDir, options: SweepOptions, startup_s: float, peaks_s: float,
                    interrupted: bool) -> None:
    """The end: the summary and charts, then where the sweep's time went, in the manifest and on the console."""
    manifest.update(end_time=now_iso(), interrupted=interrupted)
    out.write_manifest(manifest)
    charts_s = _summarize(out, options)
    budgets = [entry["runtime"]["time_budget_s"] for entry in manifest["backends"]
               if "time_budget_s" in entry.get("runtime", {})]
    manifest["time_budget_s"] = sweep_budget(budgets, startup_s, peaks_s, charts_s, process_age_s())
    out.write_manifest(manifest)
    print_time_budget(manifest)
    options.observer.finished()


def model_groups(plans: List[EntryPlan]) -> List[Tuple[ModelSpec, List[EntryPlan]]]:
    """The plans of each model, in the sweep's order, under the model as the sweep names it (unquantized)."""
    groups: Dict[str, Tuple[ModelSpec, List[EntryPlan]]] = {}
    for plan in plans:
        groups.setdefault(plan.model.label, (plan.model.loaded_as("none", plan.placement.device), []))[1].append(plan)
    return list(groups.values())


def model_annotations(groups: List[Tuple[ModelSpec, List[EntryPlan]]], manifest: dict, config: SweepConfig,
                      out: ResultsDir, done: set, baselines: Dict[str, Optional[str]]) -> Dict[str, PointAnnotations]:
    """Per model label: its token cross-check and its roofline explainer, each said in the manifest with the
    model's workload (at the top level, or in the model's own section of `models` when there are several), and the
    sweep's one baseline comparison (a resumed sweep finds the baselines' finished points in results.csv)."""
    comparison = BaselineComparison(baselines, read_rows(out.results_csv))
    annotations = {}
    gpus = [g["name"] for g in manifest["hardware"]["gpus"]]
    for (model, group), facts in zip(groups, manifest.get("models", [manifest])):
        workload = group[0].workload  # one per model, shared by its entries
        crosscheck = TokenCrossCheck(group, model.weights, out.path / "tokens.jsonl", workload.sampling.greedy,
                                     baselines, model.eos_token_ids)
        explainer, peaks = point_explainer(group, config, model, out, done, gpus)
        if peaks:
            facts["hardware_peaks"] = peaks
        quality = QualityCheck(group, out.path / PROBES_DIR, read_rows(out.results_csv))
        annotations[model.label] = PointAnnotations(crosscheck, comparison, explainer, quality)
        facts["workload"] = workload.manifest()
        facts["token_crosscheck"] = crosscheck.describe()
        if quality.active:
            facts["quantization_price"] = quality.describe()
    return annotations


def point_explainer(plans: List[EntryPlan], config: SweepConfig, model: ModelSpec, out: ResultsDir, done: set,
                    gpus: List[str]) -> Tuple[PointExplainer, dict]:
    """Each of `model`'s entries' peaks (harness/model/hardware.py), and how they are described in the manifest
    (`hardware_peaks`): datasheet figures for a GPU, the probe's for a CPU (run only when a CPU entry has batch
    points left to run; cached in the results folder). Stream points are held against a price only (their batch
    varies), so a stream sweep needs no peaks."""
    peaks, devices, described = {}, {}, {}
    shapes = {plan.label: Shape.of(plan.model) for plan in plans}  # a quantized entry's weights move fewer bytes
    for plan in plans:
        if config.scenario != "batch" or not plan.backend_cls.runs_the_model or all(
                pp.skip_reason or point_key(model.label, plan.label, pp.point) in done for pp in plan.points):
            continue
        device, dtype = plan.placement.device, run_context(config, model, plan).dtype
        peaks[plan.label] = entry_peaks(device, dtype, config.hardware, gpus, out.path / PEAKS_CACHE)
        devices[plan.label] = plan.placement.num_devices if device == "cuda" else 1
        found = peaks[plan.label]
        described[plan.label] = ({**dataclasses.asdict(found), "devices": devices[plan.label], "dtype": dtype}
                                 if found else "unknown: this GPU is not in harness/peaks.yaml; set hardware.gpu or "
                                 "hardware.peak_memory_bandwidth_gbps and hardware.peak_tflops")
    return PointExplainer(shapes, peaks, devices, config.hardware.cost_per_hour), described


def _summarize(out: ResultsDir, options: SweepOptions) -> float:
    """The summary tables and the charts; returns the seconds the charts took."""
    print_summary(read_rows(out.results_csv))
    console.print(f"Results in {out.path}/ (results.csv, samples.csv, manifest.json)")
    started = time.monotonic()
    if options.plots:
        draw_charts(out.path)
    return time.monotonic() - started


def upload(folder: Path, uri: str) -> None:
    """Copy the results folder to object storage; a failure warns and leaves the local results as they are."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(uri)
    target = f"{root.rstrip('/')}/{folder.name}"
    try:
        fs.put(str(folder), target, recursive=True)
    except Exception as e:  # any storage error: the local folder is the record, the copy is a convenience
        console.print(f"warning: upload to {uri} failed ({type(e).__name__}: {e}); results are in {folder}",
                      style="yellow")
        return
    console.print(f"Copied to {fs.unstrip_protocol(target)}")


def draw_charts(folder: Path) -> None:
    """Charts and report.md into the results folder, then report.md's answer, the best configuration at the sweep's
    targets (plots/best/); a sweep with nothing to plot only warns."""
    from plots.best.render import best_output
    from plots.errors import PlotError  # matplotlib costs a second: only when drawing
    from plots.report import make_report

    try:
        report = make_report([folder], folder / "plots")
        answer = best_output([folder], None, None, {}, "text")
    except PlotError as e:
        console.print(f"warning: no charts: {e}", style="yellow")
        return
    console.print(f"Charts and report in {report.parent}/ (open {report.name})")
    console.print(answer, markup=False, highlight=False, soft_wrap=True)  # whole lines, as --best prints them


def run_entries(plans: List[EntryPlan], manifest: dict, config: SweepConfig, done: set,
                emit: Callable[[PointResult], None], out: ResultsDir, say: Callable[[str], None],
                control: Optional[NodeControl] = None) -> None:
    """Every entry in order, each one's runtime into the manifest as it ends; the worker still closing its engine
    is ended here, and the other nodes' agents told the sweep is over, whether the loop finished or not. `say` tells
    the console what a worker is waiting for."""
    closing: Optional[WorkerRun] = None  # the last worker, closing its engine while the next one starts
    several = len(model_groups(plans)) > 1
    starter = WorkerStarter(config.preload_workers)
    try:
        for plan, entry in zip(plans, manifest["backends"]):
            log = out.path / entry["log"]
            label = f"{plan.model.label} / {plan.label}" if several else plan.label
            notices = WaitNotices(label, say, log)
            entry["runtime"] = {}  # an interrupted entry's is filled in as its worker is stopped
            entry["runtime"], closing = run_entry(plan, config, done, emit, log, closing, notices, control,
                                                  entry["runtime"], starter)
            out.write_manifest(manifest)
    finally:
        if closing is not None:
            closing.end()
        starter.close()  # every worker has ended
        if control is not None:
            control.close()


def run_entry(plan: EntryPlan, config: SweepConfig, done: set, emit: Callable[[PointResult], None], log: Path,
              previous: Optional[WorkerRun], notices: WaitNotices, control: Optional[NodeControl] = None,
              interrupted_runtime: Optional[dict] = None,
              starter: Optional[WorkerStarter] = None) -> Tuple[dict, Optional[WorkerRun]]:
    """In a worker process when there is something to run; in-process when every point is skipped anyway.

    Returns the entry's runtime (its worker fills in the rest as it ends) and the worker still closing its engine,
    if one is: `previous`, or this entry's. `previous` ends before this entry's engine loads. Interrupted (Ctrl-C),
    the stopped worker's runtime goes into `interrupted_runtime`, so the points it ran count in the manifest's
    time budget.
    """
    model = plan.model
    context = run_context(config, model, plan)
    runnable = [pp for pp in plan.points if pp.skip_reason is None and context.key(pp.point) not in done]
    if not runnable:
        EntryRunner(plan, model, config, context, RunEvents(emit)).run(done)
        return {}, previous
    job = WorkerJob(plan, model, config, context, done)
    worker = WorkerRun(job, emit, log, config.load_timeout_s, config.point_timeout_s, notices, control, starter)
    try:
        closing = worker.run(previous)
    except BaseException:  # Ctrl-C: no worker outlives the sweep, and none runs on unrecorded
        worker.end(abandon=True)
        if interrupted_runtime is not None:
            interrupted_runtime.update(worker.runtime)
        raise  # `previous`, if this worker failed before ending it, is ended by run_entries
    if not closing:
        worker.end()
        return worker.runtime, None
    return worker.runtime, worker


def run_context(config: SweepConfig, model: ModelSpec, plan: EntryPlan) -> RunContext:
    placement = plan.placement
    dtype = getattr(plan.options, "dtype", None) or model.dtype  # an entry may override it (deepspeed)
    return RunContext(config.benchmark_name, plan.label, model.label, dtype, hardware_label(placement.device),
                      placement.num_devices, placement.tp_size, placement.nodes, placement.pp_size)


def _model_info(model: ModelSpec) -> dict:
    return {"name": model.name, "label": model.label, "overrides": model.changes, "source": model.source,
            "weights": model.weights, "dtype": model.dtype, "num_params": model.num_params,
            "architecture": architecture(model.config), "config": _config_fields(model)}


def _config_fields(model: ModelSpec) -> dict:
    """The model's config as given: its config.json when planning read it directly (importing transformers here,
    in the parent, would cost seconds for this alone), else transformers' fields that differ from its defaults."""
    if model.built_hf_config is None:
        return model.config.to_dict()
    return model.hf_config.to_diff_dict()


def _entry_info(plan: EntryPlan, several_models: bool) -> dict:
    """An entry as the manifest keeps it; `log`, its worker's output relative to the results folder, is named by a
    safe file name of its label (and its model's, in a folder, when the sweep has several)."""
    folder = f"{safe_file_name(plan.model.label, 'model')}/" if several_models else ""
    return {"label": plan.label, "model": plan.model.label, "log": f"logs/{folder}{safe_file_name(plan.label)}.log",
            "options": dataclasses.asdict(plan.options), "placement": dataclasses.asdict(plan.placement),
            "memory_budget_bytes": plan.budget_bytes}

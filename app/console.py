"""What the user sees: the plan, a progress bar with ETA, one line per point, a summary table."""

from __future__ import annotations

import sys
from typing import Dict, List, Mapping, Optional, SupportsFloat

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from app.console_validity import print_validity, validity_text
from harness.measure.metrics import SLIP_WARN_MS
from harness.model.hardware import Machine
from harness.model.memory import GiB
from harness.model.spec import ModelSpec
from harness.plan.capacity import Capacity
from harness.plan.entry import EntryPlan

# Logs and CI capture stdout: wide lines, not rich's 80 columns. No markup: a grid's labels hold [brackets].
console = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 140)
# Beside output that must stay machine-readable on stdout (a platform launch's dry run prints run YAML there).
err_console = Console(stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 140)


def _float(cell: object) -> float:
    assert isinstance(cell, (str, SupportsFloat)), cell  # a number; its text in a row read back from results.csv
    return float(cell)


def _num(value: object, fmt: str = ".1f") -> str:
    return "-" if value in (None, "") else format(_float(value), fmt)


def print_plan(plans: List[EntryPlan]) -> None:
    table = Table(title="Sweep plan (nothing loaded)")
    workloads = {plan.model.label: plan.workload.describe() for plan in plans}
    several = len(workloads) > 1  # a sweep over `models`: which model each row is
    for name in ("model",) * several + ("backend", "device", "load", "input", "output", "est. memory", "allowed",
                                        "runs?"):
        table.add_column(name, justify="left" if name in ("model", "backend", "device", "runs?") else "right")
    for plan in plans:
        device = f"{plan.placement.device} x{plan.placement.num_devices}"
        for pp in plan.points:
            p = pp.point
            verdict = "yes" if pp.skip_reason is None else "no: " + ("over memory" if pp.over_memory else pp.skip_reason)
            if pp.search:
                verdict += f": search from bs {pp.search.start}, at most {pp.search.limit}"
            table.add_row(*(plan.model.label,) * several, plan.label, device,
                          _load(p.batch_size, p.request_rate, p.max_concurrency), str(p.input_length),
                          str(p.output_length), f"{pp.estimate.total_bytes / GiB:.2f} GiB",
                          f"{plan.budget_bytes / GiB:.1f} GiB", verdict)
    console.print(table)
    for model in dict((plan.model.label, plan.model) for plan in plans).values():
        console.print(f"model: {describe_model(model)}", markup=False)
    for label, text in workloads.items():
        console.print(f"workload{f' ({label})' if several else ''}: {text}")
    print_destinations(plans)
    runnable = sum(pp.skip_reason is None for plan in plans for pp in plan.points)
    total = sum(len(plan.points) for plan in plans)
    console.print(f"{runnable} of {total} points fit this machine; the rest would be recorded as skipped.")
    warn_unavailable(plans)


def describe_model(model: ModelSpec) -> str:
    """`/models/qwen (qwen2, 7.6 B parameters, bf16, random weights)`: which model a plan is for, as read."""
    model_type = getattr(model.config, "model_type", None) or "unknown type"
    return (f"{model.label} ({model_type}, {parameter_count(model.num_params)} parameters, {model.dtype}, "
            f"{model.weights} weights)")


def parameter_count(count: int) -> str:
    """`7.6 B`, `8.6 M`."""
    return f"{count / 1e9:,.1f} B" if count >= 1e9 else f"{count / 1e6:,.1f} M"


def print_capacity(rows: List[Capacity], machine: Optional[Machine], model: Optional[str] = None,
                   to: Console = console) -> None:
    """`model` names the model in the title, in a sweep over several."""
    where = f"{machine.num_gpus} x {machine.gpu}" if machine else "this machine"
    if any(c.placement.nodes > 1 for c in rows):
        where += " per node"
    title = f"Largest batch by the memory estimate{f' of {model}' if model else ''}, on {where} (nothing loaded)"
    table = Table(title=title)
    columns = ("backend", "device", "input", "output", "max batch", "KV tokens", "weights", "KV cache", "activations",
               "allowed")
    for name in columns:
        table.add_column(name, justify="left" if name in ("backend", "device") else "right")
    for c in rows:
        device = f"{c.placement.device} x{c.placement.num_devices}"
        if c.estimate is None:
            table.add_row(c.label, device, str(c.input_length), str(c.output_length), "-", "-", "-", "-", "-", "-")
            continue
        e = c.estimate
        table.add_row(c.label, device, str(c.input_length), str(c.output_length),
                      str(c.max_batch) if c.max_batch else "does not fit", f"{c.kv_tokens:,}",
                      f"{e.weights_bytes / GiB:.1f} GiB", f"{e.kv_cache_bytes / GiB:.2f} GiB",
                      f"{e.activation_bytes / GiB:.2f} GiB", f"{c.budget_bytes / GiB:.1f} GiB")
    to.print(table)
    to.print("KV cache and activations are at the max batch (at batch 1 where nothing fits); KV tokens: what "
                  "the allowed memory leaves for the KV cache beside weights and activations.")
    reasons = {}
    for c in rows:
        if c.reason and c.label not in reasons:
            reasons[c.label] = c.reason
    for label, reason in reasons.items():
        to.print(f"{label}: {reason}", style="yellow")


def print_destinations(plans: List[EntryPlan]) -> None:
    """Where each entry's requests go when that is not its worker (a server's URL), once per entry."""
    for label, where in dict.fromkeys((plan.label, plan.backend_cls.destination(plan.options)) for plan in plans):
        if where:
            console.print(f"backend {label}: {where}", markup=False)


def warn_unavailable(plans: List[EntryPlan]) -> None:
    """Once per entry and reason; in a sweep over several models, naming the models it holds for unless all."""
    models = list(dict.fromkeys(plan.model.label for plan in plans))
    reasons: Dict[tuple, List[str]] = {}
    for plan in plans:
        if plan.unavailable:
            reasons.setdefault((plan.label, plan.unavailable), []).append(plan.model.label)
    for (label, reason), which in reasons.items():
        of = "" if which == models else f" ({', '.join(which)})"
        console.print(f"warning: backend {label}{of}: {reason}; its points will be skipped", style="yellow")


def _load(batch_size, request_rate, max_concurrency) -> str:
    """What loads the engine at a point: `bs 8`, `4/s`, `burst`, `auto` (a rate search), with ` cap 2` when capped."""
    if batch_size not in (None, ""):
        return f"bs {batch_size}"
    if request_rate in (None, ""):
        load = "auto"
    else:
        load = "burst" if float(request_rate) == float("inf") else f"{float(request_rate):g}/s"
    return load + (f" cap {max_concurrency}" if max_concurrency not in (None, "") else "")


def ci_text(row: Mapping[str, object]) -> str:
    """The mean latency's 95% interval as ± a share of it (`1.2%`), `*` where num_batches: auto did not converge."""
    low, high, mean = (row.get(k) for k in ("latency_ms_ci95_low", "latency_ms_ci95_high", "latency_ms_mean"))
    if low in (None, "") or mean in (None, "") or not _float(mean):  # no interval, or none relative to a 0 ms mean
        return "-"
    return f"{(_float(high) - _float(low)) / 2 / _float(mean):.1%}" + ("*" if row.get("converged") == "false" else "")


def _failed(row: Dict[str, object]) -> str:
    """A stream point that is ok with some requests failed (stream.max_failed_share) says how many; one whose answers
    are held to workload.json_schema, the share that did not meet it."""
    failed, invalid = row.get("requests_failed"), row.get("invalid_answer_share")
    return ((f"  {failed} of {row['num_requests']} requests failed (requests.csv: error)" if failed else "")
            + (f"  invalid answers {_float(invalid):.0%}" if invalid not in (None, "") else ""))


def point_line(row: Dict[str, object]) -> str:
    load = _load(row["batch_size"], row["request_rate"], row["max_concurrency"])
    head = f"[{row['backend']}] {load} in={row['input_length']} out={row['output_length']}"
    if row["status"] != "ok":
        return f"{head} {row['status']}: {row['error']}"
    if row.get("search") == "result":
        if row["scenario"] == "batch":
            return f"{head} ok  largest batch that ran: {row['max_batch_size_found']} ({row['search_probes']})"
        return f"{head} ok  highest rate within the SLO: {_num(row['max_rate_within_slo'], '.3g')} req/s ({row['search_probes']})"
    if row["scenario"] == "stream" and row.get("inputs_per_s") is not None:  # embeddings, rerank: answers whole
        return (f"{head} ok  e2e p50 {_num(row['e2e_ms_p50'])} / p99 {_num(row['e2e_ms_p99'])} ms  "
                f"{_num(row['achieved_request_rate'], '.2f')} req/s  {_num(row['inputs_per_s'], '.3g')} inputs/s  "
                f"{_num(row['input_tokens_per_s'])} input tok/s  goodput {_num(row['goodput'], '.2f')} req/s "
                f"(SLO met by {_num(_float(row['slo_attainment']) * 100, '.0f')}%)" + _failed(row))
    if row["scenario"] == "stream":
        return (f"{head} ok  ttft p50 {_num(row['ttft_ms_p50'])} / p99 {_num(row['ttft_ms_p99'])} ms  "
                f"tpot p50 {_num(row.get('tpot_ms_p50'), '.2f')} ms  e2e p99 {_num(row['e2e_ms_p99'])} ms  "
                f"{_num(row['achieved_request_rate'], '.2f')} req/s  goodput {_num(row['goodput'], '.2f')} req/s "
                f"(SLO met by {_num(_float(row['slo_attainment']) * 100, '.0f')}%)" + _failed(row)
                + validity_text(row))
    line = (f"{head} ok  latency {_num(row['latency_ms_mean'])} ms ±{ci_text(row)} ({row['num_batches']} batches)  "
            f"ttft {_num(row['ttft_ms_mean'])} ms  "
            f"tpot {_num(row.get('tpot_ms_mean'), '.2f')} ms  {_num(row['throughput_tokens_per_s'])} tok/s")
    if row.get("spec_method"):
        line += f"  acceptance {_num(row['acceptance_rate'], '.2f')}  speed-up {_num(row['speedup_vs_baseline'], '.2f')}x"
    return line + validity_text(row)


def with_model_names(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """For display: where rows hold several models (a sweep over `models`), each row's `backend` reads
    `model / backend`, so every table and line says which model it is about."""
    if len({r.get("model") for r in rows}) < 2:
        return rows
    return [{**r, "backend": f"{r['model']} / {r['backend']}"} for r in rows]


class SweepProgress:
    """A progress bar over points with an ETA; finished points print above it (`[model / backend]` in a sweep over
    several models)."""

    def __init__(self, total: int, several_models: bool = False):
        self.several_models = several_models
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console)
        self.task = self.progress.add_task("sweep", total=total)

    def __enter__(self) -> "SweepProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def note(self, text: str) -> None:
        """A line above the bar, flushed at once, also when stdout is a file or a pipe."""
        self.progress.console.print(text, markup=False, soft_wrap=True)

    def point_done(self, row: Dict[str, object]) -> None:
        shown = {**row, "backend": f"{row['model']} / {row['backend']}"} if self.several_models else row
        self.progress.console.print(point_line(shown), markup=False)
        if row.get("search") != "probe":  # a search's probes are steps of one planned point
            self.progress.advance(self.task)


def print_time_budget(manifest: dict) -> None:
    """Where the sweep's time went, per entry that ran a worker, and the sweep's wall time against its work."""
    from harness.run.time_budget import ENTRY_PARTS

    several = "models" in manifest
    entries = [(f"{e['model']} / {e['label']}" if several else e["label"], e["runtime"]["time_budget_s"])
               for e in manifest["backends"] if "time_budget_s" in e.get("runtime", {})]
    sweep = manifest["time_budget_s"]
    if entries:
        table = Table(title="Time budget, seconds (manifest.json: time_budget_s)")
        table.add_column("backend")
        names = {"worker_start_s": "start", "engine_import_s": "import", "waiting_s": "wait", "load_s": "load",
                 "warmup_s": "warm-up",
                 "timed_s": "timed", "shutdown_s": "shutdown", "other_s": "other", "total_s": "total"}
        for part in ENTRY_PARTS:
            table.add_column(names[part], justify="right")
        for label, budget in entries:
            table.add_row(label, *(_num(budget.get(part), ".1f") for part in ENTRY_PARTS))
        console.print(table)
    ratio = f", {sweep['wall_over_work']:.2f}x" if sweep["wall_over_work"] else ""
    console.print(f"Wall {sweep['wall_s']:.1f} s for {sweep['work_s']:.1f} s of work (engine import, load, warm-up, "
                  f"timed){ratio}; start-up {sweep['startup_s']:.1f} s, peak probe {sweep['peaks_probe_s']:.1f} s, "
                  f"entries {sweep['entries_s']:.1f} s{_overlapped(sweep)}, charts {sweep['charts_s']:.1f} s, other "
                  f"{sweep['other_s']:.1f} s")


def _overlapped(sweep: dict) -> str:
    overlap_s = sweep.get("entries_overlap_s") or 0.0
    return f" ({overlap_s:.1f} s of starts beside shutdowns)" if overlap_s >= 0.05 else ""


def print_summary(rows: List[Dict[str, str]]) -> None:
    rows = with_model_names(rows)
    batch = [r for r in rows if r.get("scenario", "batch") == "batch"]
    stream = [r for r in rows if r.get("scenario") == "stream"]
    if batch:
        _batch_summary(batch)
    if stream:
        _stream_summary(stream)
    speculative = [r for r in rows if r.get("spec_method") and r.get("search") != "result"]
    if speculative:
        _spec_summary(speculative)
    print_validity(console, rows, _load)


def _spec_summary(rows: List[Dict[str, str]]) -> None:
    table = Table(title="Speculative decoding (vs the same engine without it)")
    columns = ("backend", "method", "k", "load", "input", "output", "status", "acceptance", "accepted length",
               "TPOT speed-up", "tokens identical")
    for name in columns:
        table.add_column(name, justify="left" if name in ("backend", "method", "status") else "right")
    for r in rows:
        table.add_row(r["backend"], r["spec_method"], r["spec_tokens"],
                      _load(r["batch_size"], r["request_rate"], r["max_concurrency"]), r["input_length"],
                      r["output_length"], r["status"], _num(r["acceptance_rate"], ".2f"),
                      _num(r["mean_accepted_length"], ".2f"), _num(r["speedup_vs_baseline"], ".2f"),
                      _num(r["tokens_identical_share"], ".3f"))
    console.print(table)
    for r in rows:
        if not r["spec_baseline"] and r["status"] == "ok":
            console.print(f"note: {r['backend']} has no baseline entry (the same engine and options without "
                          "speculative): no speed-up or token check", style="yellow")
            break
    for r in rows:
        if r["tokens_identical_share"] and float(r["tokens_identical_share"]) < 1:
            console.print(
                f"warning: {r['backend']} at {_load(r['batch_size'], r['request_rate'], r['max_concurrency'])} "
                f"in={r['input_length']} out={r['output_length']}: only {float(r['tokens_identical_share']):.1%} of its "
                f"greedy tokens match {r['spec_baseline']}'s: speculation changed the output (the method, or numerics "
                "of batched verification)", style="yellow")


def _stream_summary(rows: List[Dict[str, str]]) -> None:
    table = Table(title="Request streams (latencies from each request's scheduled arrival)")
    columns = ("backend", "load", "input", "output", "status", "req/s", "TTFT p50", "TTFT p99", "TPOT p50",
               "E2E p99", "tokens/s", "SLO met", "goodput", "slip p99")
    for name in columns:
        table.add_column(name, justify="left" if name in ("backend", "status") else "right")
    measured = [r for r in rows if r.get("search") != "result"]
    for r in measured:
        attained = _num(float(r["slo_attainment"]) * 100, ".0f") + "%" if r["slo_attainment"] else "-"
        table.add_row(r["backend"], _load(None, r["request_rate"], r["max_concurrency"]), r["input_length"],
                      r["output_length"], r["status"], _num(r["achieved_request_rate"], ".2f"), _num(r["ttft_ms_p50"]),
                      _num(r["ttft_ms_p99"]), _num(r["tpot_ms_p50"], ".2f"), _num(r["e2e_ms_p99"]),
                      _num(r["throughput_tokens_per_s"]), attained, _num(r["goodput"], ".2f"),
                      _num(r["send_slip_ms_p99"], ".2f"))
    console.print(table)
    for r in rows:
        if r.get("search") == "result" and r["status"] == "ok":
            cap = f", cap {r['max_concurrency']}" if r["max_concurrency"] else ""
            found = (f"{float(r['max_rate_within_slo']):.3g} req/s" if r["max_rate_within_slo"]
                     else "none of the rates probed")
            console.print(f"{r['backend']} (in={r['input_length']} out={r['output_length']}{cap}): highest rate within "
                          f"the SLO: {found} ({r['search_probes']})")
    slipped = [r for r in measured if r["send_slip_ms_p99"] and float(r["send_slip_ms_p99"]) > SLIP_WARN_MS]
    for r in slipped:
        console.print(
            f"warning: {r['backend']} at {_load(None, r['request_rate'], r['max_concurrency'])}: p99 send slip "
            f"{float(r['send_slip_ms_p99']):.1f} ms > {SLIP_WARN_MS:g} ms: the client, not the engine, limited the "
            "offered load; its latencies include that lateness", style="yellow")


def _batch_summary(rows: List[Dict[str, str]]) -> None:
    table = Table(title="Results (MBU, MFU: shares of the peaks in manifest.json's hardware_peaks)")
    columns = ("backend", "batch", "input", "output", "status", "latency ms", "±95%", "TTFT ms", "TPOT ms", "tokens/s",
               "MBU", "MFU", "x roofline")
    for name in columns:
        table.add_column(name, justify="left" if name in ("backend", "status") else "right")
    searches = [r for r in rows if r.get("search") == "result"]
    for r in rows:
        if r.get("search") == "result":
            continue
        batch = r["batch_size"] + (" (max)" if r.get("max_batch") == "true" else "")
        table.add_row(r["backend"], batch, r["input_length"], r["output_length"], r["status"],
                      _num(r["latency_ms_mean"]), ci_text(r), _num(r["ttft_ms_mean"]), _num(r["tpot_ms_mean"], ".2f"),
                      _num(r["throughput_tokens_per_s"]), _num(r.get("mbu"), ".2f"), _num(r.get("mfu"), ".3f"),
                      _num(r.get("roofline_ratio"), ".1f"))
    console.print(table)
    unsettled = [r for r in rows if r.get("converged") == "false"]
    if unsettled:
        console.print(f"* {len(unsettled)} point(s) reached stop.max_batches before the mean latency's 95% interval "
                      "was within stop.target_ci_pct: their figures are less certain than asked for", style="yellow")
    for r in searches:
        found = r["max_batch_size_found"] or "none"
        console.print(f"{r['backend']} (in={r['input_length']} out={r['output_length']}): largest batch that ran: "
                      f"{found} ({r['search_probes']})")
    for r in rows:
        if r.get("roofline_ratio") and float(r["roofline_ratio"]) < 1:
            console.print(f"warning: {r['backend']} at bs {r['batch_size']} in={r['input_length']} "
                          f"out={r['output_length']}: measured {float(r['roofline_ratio']):.2f}x its roofline bound, "
                          "faster than the peaks allow: a peak (hardware_peaks) or a formula is wrong", style="yellow")

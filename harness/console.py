"""What the user sees: the plan, a progress bar with ETA, one line per point, a summary table."""

from __future__ import annotations

import sys
from typing import Dict, List

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from harness.memory import GiB
from harness.sweep import EntryPlan

# Logs and CI capture stdout: give them wide lines instead of rich's 80-column fallback.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)


def _num(value, fmt: str = ".1f") -> str:
    if value in (None, ""):
        return "-"
    return format(float(value), fmt)


def print_plan(plans: List[EntryPlan]) -> None:
    table = Table(title="Sweep plan (nothing loaded)")
    for name in ("backend", "device", "batch", "input", "output", "est. memory", "allowed", "runs?"):
        table.add_column(name, justify="left" if name in ("backend", "device", "runs?") else "right")
    for plan in plans:
        device = f"{plan.placement.device} x{plan.placement.num_devices}"
        for pp in plan.points:
            p = pp.point
            verdict = "yes" if pp.skip_reason is None else "no: " + (plan.unavailable or "over memory")
            table.add_row(plan.label, device, str(p.batch_size), str(p.input_length), str(p.output_length),
                          f"{pp.estimate.total_bytes / GiB:.2f} GiB", f"{plan.budget_bytes / GiB:.1f} GiB", verdict)
    console.print(table)
    console.print(f"workload: {plans[0].workload.describe()}")
    runnable = sum(pp.skip_reason is None for plan in plans for pp in plan.points)
    total = sum(len(plan.points) for plan in plans)
    console.print(f"{runnable} of {total} points fit this machine; the rest would be recorded as skipped.")
    warn_unavailable(plans)


def warn_unavailable(plans: List[EntryPlan]) -> None:
    for plan in plans:
        if plan.unavailable:
            console.print(f"warning: backend {plan.label}: {plan.unavailable}; its points will be skipped",
                          style="yellow")


def point_line(row: Dict[str, object]) -> str:
    head = f"[{row['backend']}] bs={row['batch_size']} in={row['input_length']} out={row['output_length']}"
    if row["status"] != "ok":
        return f"{head} {row['status']}: {row['error']}"
    return (f"{head} ok  latency {_num(row['latency_ms_mean'])} ms  ttft {_num(row['ttft_ms_mean'])} ms  "
            f"tpot {_num(row.get('tpot_ms_mean'), '.2f')} ms  {_num(row['throughput_tokens_per_s'])} tok/s")


class SweepProgress:
    """A progress bar over points with an ETA; finished points print above it."""

    def __init__(self, total: int):
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console)
        self.task = self.progress.add_task("sweep", total=total)

    def __enter__(self) -> "SweepProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def point_done(self, row: Dict[str, object]) -> None:
        self.progress.console.print(point_line(row), markup=False)
        self.progress.advance(self.task)


def print_summary(rows: List[Dict[str, str]]) -> None:
    table = Table(title="Results")
    columns = ("backend", "batch", "input", "output", "status", "latency ms", "TTFT ms", "TPOT ms", "tokens/s")
    for name in columns:
        table.add_column(name, justify="left" if name in ("backend", "status") else "right")
    for r in rows:
        table.add_row(r["backend"], r["batch_size"], r["input_length"], r["output_length"], r["status"],
                      _num(r["latency_ms_mean"]), _num(r["ttft_ms_mean"]), _num(r["tpot_ms_mean"], ".2f"),
                      _num(r["throughput_tokens_per_s"]))
    console.print(table)

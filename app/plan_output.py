"""`--plan`'s floors and forecast: a table per model after the capacity table (text), or one JSON line per entry,
point and batch size (`--format json`, for scripts: nothing else goes to stdout then)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from rich.console import Console
from rich.table import Table

from app.console import print_capacity
from backends.registry import BACKENDS
from harness.config.gpus import gpu_table
from harness.config.sweep import SweepConfig
from harness.model.hardware import Machine
from harness.model.spec import ModelSpec
from harness.plan.capacity import Capacity
from harness.plan.entry import EntryPlan
from harness.plan.floors import Floors, floors_of
from harness.plan.forecast import Calibration, Forecast
from harness.plan.outlook import PlanPoint, floored_as, plan_points
from workloads.base import Workload

FORMATS = ("text", "json")


def _num(value: Optional[float]) -> str:
    """3 significant figures, never an exponent: 1,630, 24.9k, 2.49M."""
    if value is None:
        return "-"
    for above, scale, suffix in ((1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if value >= above:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _cell(floor: Optional[float], f: Optional[Tuple[Optional[float], ...]]) -> str:
    """`floor | forecast (low-high)`, or the floor alone without a forecast."""
    if floor is None:
        return "-"
    if f is None or f[0] is None:
        return _num(floor)
    return f"{_num(floor)} | {_num(f[0])} ({_num(f[1])}-{_num(f[2])})"


def _speeds(fl: Floors, f: Optional[Forecast], p: PlanPoint) -> Tuple[str, str]:
    """Output tokens/s per GPU and per user: batch x output over the latency; 1000 / TPOT; ceiling | forecast."""
    output = p.capacity.output_length
    per_gpu: Optional[Tuple[Optional[float], ...]] = None
    per_user: Optional[Tuple[Optional[float], ...]] = None
    if f is not None:
        per_gpu = tuple(p.batch_size * output / (f.latency_ms(output, w) / 1e3) / fl.num_devices
                        for w in ("", "_high", "_low"))
        if f.tpot_ms and f.tpot_ms_low and f.tpot_ms_high:
            per_user = (1e3 / f.tpot_ms, 1e3 / f.tpot_ms_high, 1e3 / f.tpot_ms_low)
    return _cell(fl.per_gpu_ceiling_tokens_per_s, per_gpu), _cell(fl.per_user_ceiling_tokens_per_s, per_user)


SHORT_BOUND = {"memory bandwidth": "memory", "compute": "compute", "interconnect": "interconnect",
               "host link": "host link"}


def _binds(fl: Floors) -> str:
    return SHORT_BOUND[fl.ttft.bound] + (f" / {SHORT_BOUND[fl.tpot.bound]}" if fl.tpot else "")


def needs_gpu_hint(rows: List[Capacity], machine: Optional[Machine]) -> bool:
    return machine is None and any(c.estimate is None and c.placement.device == "cuda" for c in rows)


def no_gpu_hint() -> str:
    """The last line of `--plan` where this machine lacks the GPUs the entries ask for: how to plan for a machine
    you do not have (the names are harness/peaks.yaml's)."""
    return ("This machine lacks those GPUs: plan for one you do not have by naming it, e.g. hardware.gpu=h100-sxm "
            f"hardware.num_gpus=8 (hardware.gpu: {', '.join(gpu_table())})")


def print_floors(points: List[PlanPoint], machine: Optional[Machine], calibration: Optional[Calibration],
                 to: Console) -> None:
    """The table, then where the peaks come from and what the forecast rests on; only the notes where no point
    has a floor (no peaks known, or no entry can run there)."""
    if all(p.floors is None for p in points):
        _notes(points, calibration, to)
        return
    where = f"{machine.num_gpus} x {machine.gpu}" if machine else "this machine"
    pair = "floor | forecast (interval)" if calibration else "floor"
    table = Table(title=f"Roofline floors{' and calibrated forecast' if calibration else ''} on {where} (nothing "
                  "loaded: a floor is the fastest possible; a forecast, the floor / the engine's measured fraction)")
    for name in ("backend", "input", "output", "batch", f"TTFT ms: {pair}", f"TPOT ms: {pair}", "binds: prefill / "
                 "decode", f"tok/s per GPU: {pair.replace('floor', 'ceiling')}",
                 f"tok/s per user: {pair.replace('floor', 'ceiling')}"):
        left = name in ("backend", "binds: prefill / decode")
        table.add_column(name, justify="left" if left else "right", no_wrap=name.startswith("binds"))
    for p in points:
        c, fl, f = p.capacity, p.floors, p.forecast
        batch = f"{p.batch_size}" + ("" if p.fits else " (does not fit)")
        if fl is None:
            table.add_row(c.label, str(c.input_length), str(c.output_length), batch, "-", "-", "-", "-", "-")
            continue
        table.add_row(c.label, str(c.input_length), str(c.output_length), batch,
                      _cell(fl.ttft_floor_ms, (f.ttft_ms, f.ttft_ms_low, f.ttft_ms_high) if f else None),
                      _cell(fl.tpot_floor_ms, (f.tpot_ms, f.tpot_ms_low, f.tpot_ms_high) if f else None),
                      _binds(fl), *_speeds(fl, f, p))
    to.print(table)
    _notes(points, calibration, to)


def _notes(points: List[PlanPoint], calibration: Optional[Calibration], to: Console) -> None:
    sources = dict.fromkeys((p.capacity.label, p.target.why, p.target.peaks is not None) for p in points)
    if len({(why, known) for _, why, known in sources}) == 1:
        _, why, known = next(iter(sources))
        to.print(f"Peaks (every entry): {why}" if known else why, markup=False, soft_wrap=True)
    else:
        for label, why, known in sources:
            to.print(f"{label}: peaks from {why}" if known else f"{label}: {why}", markup=False, soft_wrap=True)
    if calibration is None and any(p.floors for p in points):
        to.print("No --calibrate: floors only. A forecast needs measured rows: --calibrate results/RUN ...",
                 markup=False)
    if calibration is None:
        return
    to.print(f"Forecast: calibrated on {', '.join(map(str, calibration.folders))} (engines: "
             f"{', '.join(calibration.engines)}): the fraction of its floor each engine reached there, interpolated in "
             "log2(batch); in brackets the min-max of the fractions at the nearest calibrated batch sizes.",
             markup=False, soft_wrap=True)
    for note in dict.fromkeys(p.note for p in points if p.note and p.floors):
        to.print(note, style="yellow", markup=False)


def json_line(p: PlanPoint, model_label: str) -> str:
    """One point as a JSON object: the capacity, the model's figures, the peaks, the floors, the forecast."""
    c = p.capacity
    e = c.estimate
    out: Dict[str, object] = {
        "model": model_label, "backend": c.label, "device": c.placement.device,
        "num_devices": c.placement.num_devices, "tp_size": c.placement.tp_size, "pp_size": c.placement.pp_size,
        "input_length": c.input_length, "output_length": c.output_length, "batch_size": p.batch_size,
        "fits": p.fits, "max_batch": c.max_batch, "kv_tokens": c.kv_tokens, "memory_budget_bytes": c.budget_bytes,
        "estimate": None if e is None else {"weights_bytes": e.weights_bytes, "kv_cache_bytes": e.kv_cache_bytes,
                                            "activation_bytes": e.activation_bytes},
        **asdict(p.model),
        "peaks": None if p.target.peaks is None else {
            "memory_bandwidth_gbps": p.target.peaks.memory_bandwidth_gbps, "tflops": p.target.peaks.tflops,
            "interconnect_gbps": p.target.links.interconnect_gbps,
            "host_link_gbps": p.target.links.host_link_gbps, "source": p.target.why},
        "floors": _floors_json(p.floors), "forecast": _forecast_json(p), "note": p.note or c.reason or None,
    }
    return json.dumps(out)


def _floors_json(fl: Optional[Floors]) -> Optional[Dict[str, object]]:
    if fl is None:
        return None
    return {"ttft_floor_ms": fl.ttft_floor_ms, "ttft_bound": fl.ttft.bound, "tpot_floor_ms": fl.tpot_floor_ms,
            "tpot_bound": fl.tpot.bound if fl.tpot else None, "latency_floor_ms": fl.latency_floor_ms,
            "throughput_ceiling_tokens_per_s": fl.throughput_ceiling_tokens_per_s,
            "output_tokens_per_s_per_gpu_ceiling": fl.per_gpu_ceiling_tokens_per_s,
            "output_tokens_per_s_per_user_ceiling": fl.per_user_ceiling_tokens_per_s,
            "ttft_bounds_ms": {k: v * 1e3 for k, v in fl.ttft.bounds_s.items()},
            "tpot_bounds_ms": {k: v * 1e3 for k, v in fl.tpot.bounds_s.items()} if fl.tpot else None}


def _forecast_json(p: PlanPoint) -> Optional[Dict[str, object]]:
    f = p.forecast
    if f is None:
        return None
    output, devices = p.capacity.output_length, p.floors.num_devices if p.floors else 1
    latency = {which: f.latency_ms(output, which) for which in ("", "_low", "_high")}
    return {"calibrated_as": f.engine, "ttft_ms": f.ttft_ms, "ttft_ms_low": f.ttft_ms_low,
            "ttft_ms_high": f.ttft_ms_high, "tpot_ms": f.tpot_ms, "tpot_ms_low": f.tpot_ms_low,
            "tpot_ms_high": f.tpot_ms_high, "latency_ms": latency[""], "latency_ms_low": latency["_low"],
            "latency_ms_high": latency["_high"],
            "output_tokens_per_s_per_gpu": p.batch_size * output / (latency[""] / 1e3) / devices,
            "output_tokens_per_s_per_user": 1e3 / f.tpot_ms if f.tpot_ms else None,
            "prefill_fraction": asdict(f.prefill_fraction),
            "decode_fraction": asdict(f.decode_fraction) if f.decode_fraction else None}


def _print_lines(lines: Iterable[str]) -> bool:
    """Print to stdout; False once the reader has gone (`--format json | head`): a script that read what it
    wanted is not an error, and Python would otherwise print a BrokenPipeError traceback at exit."""
    try:
        for line in lines:
            print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit writes nowhere
        return False
    return True


def show_plan(config: SweepConfig, models: List[Tuple[ModelSpec, Workload]], machine: Optional[Machine],
              calibration: Optional[Calibration], fmt: str, charts_dir: Optional[Path], to: Console) -> None:
    """`--plan`: per model, the capacity table and the floors (text) or the JSON lines; then the charts if asked."""
    where = f"{machine.num_gpus} x {machine.gpu}" if machine else "this machine"
    written: List[Path] = []
    hint = False  # the plan's last line, after every table, where this machine lacks the entries' GPUs
    for model, workload in models:
        points = plan_points(config, model, BACKENDS, workload, machine, calibration)
        if fmt == "json":
            if not _print_lines(json_line(p, model.label) for p in points):
                return
        else:
            capacities = list({id(p.capacity): p.capacity for p in points}.values())
            print_capacity(capacities, machine, model.label if len(models) > 1 else None, to=to)
            print_floors(points, machine, calibration, to)
            hint = hint or needs_gpu_hint(capacities, machine)
        if charts_dir is not None:
            from app.plan_charts import draw  # matplotlib: only for --charts

            written += draw(points, model.label, where, charts_dir, prefix=len(models) > 1)
    if charts_dir is not None and fmt != "json":
        to.print(f"{len(written)} chart(s) in {charts_dir}/ (dashed: forecast, dotted: floor; none is a measurement)",
                 markup=False)
    if hint:
        to.print(no_gpu_hint(), markup=False, soft_wrap=True)


def print_dry_run_floors(config: SweepConfig, plans: List[EntryPlan], machine: Optional[Machine],
                         to: Console) -> None:
    """`--dry-run`: after the plan, the roofline floors of its batch points (--plan's, harness/plan/floors.py), where
    the peaks are known: a named GPU (hardware.gpu) or hardware.peak_*. On this machine's CPU --dry-run measures
    nothing, so it prints no floors there (`--plan --calibrate` reads a sweep's measured peaks)."""
    table = Table(title="Roofline floors of the batch points (nothing loaded: the fastest each could run)")
    for name in ("backend", "input", "output", "batch", "TTFT floor ms", "TPOT floor ms", "binds: prefill / decode",
                 "peaks"):
        table.add_column(name, justify="left" if name in ("backend", "binds: prefill / decode", "peaks") else "right")
    for plan in plans:
        target, layout = floored_as(config, machine, plan.placement, plan.options, plan.model.dtype, None)
        if target.peaks is None or plan.unavailable:
            continue
        for p in (pp.point for pp in plan.points if pp.point.batch_size is not None):
            assert p.batch_size is not None
            fl = floors_of(plan.model, layout, target.peaks, target.links, p.batch_size, p.input_length,
                           p.output_length)
            table.add_row(plan.label, str(p.input_length), str(p.output_length), str(p.batch_size),
                          _num(fl.ttft_floor_ms), _num(fl.tpot_floor_ms), _binds(fl), target.why)
    if table.row_count:
        to.print(table)

"""`--plan`'s full answer per entry and point: what fits (capacity.py), the floors there (floors.py) and, with
`--calibrate`, the forecast (forecast.py), at each batch size of the sweep.

The batch sizes: the sweep's list (those past the largest fitting one are kept, marked as not fitting); with
`batch_sizes: auto`, the powers of two up to the largest batch that fits, and that batch; a stream sweep, 1 and the
largest batch (the concurrency its memory allows).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List, Optional, Tuple

from harness.config.engine import BackendOptions
from harness.config.registry import Registry
from harness.config.sweep import SweepConfig
from harness.model.hardware import Machine, Peaks, datasheet_peaks
from harness.model.memory import kv_cache_bytes
from harness.model.spec import ModelSpec
from harness.plan.capacity import Capacity, plan_capacity
from harness.plan.engine import EngineClass, Placement, PointWorkload
from harness.plan.floors import NO_LINKS, Floors, Layout, Links, floors_of
from harness.plan.forecast import DECODE, PREFILL, Calibration, Forecast


@dataclass(frozen=True)
class Target:
    """The peaks an entry's floors are computed with, and where they come from; peaks None: unknown (`why`)."""

    peaks: Optional[Peaks]
    links: Links
    why: str  # the peaks' source, or why there are none


@dataclass(frozen=True)
class ModelFigures:
    """What the harness computes of the model as the entry loads it, for scripts reading the JSON."""

    num_params: int
    weights_bytes: float
    kv_cache_bytes_per_token: int


@dataclass(frozen=True)
class PlanPoint:
    capacity: Capacity
    batch_size: int
    fits: bool  # within the largest batch the memory estimate fits
    target: Target
    model: ModelFigures
    floors: Optional[Floors]
    forecast: Optional[Forecast]
    note: str  # why there is no forecast (no calibration, none for this engine), or ''


def target_of(config: SweepConfig, machine: Optional[Machine], device: str, dtype: str,
              calibration: Optional[Calibration]) -> Target:
    """YAML hardware.peak_* first; then the planned GPU's datasheet (every entry, a CPU one too, is floored on it);
    on this machine's CPU, the probe's peaks a --calibrate folder measured (--plan itself measures nothing)."""
    hw = config.hardware
    links = Links.of_gpu(machine.gpu) if machine else NO_LINKS
    if hw.peak_memory_bandwidth_gbps and hw.peak_tflops:
        return Target(Peaks(hw.peak_memory_bandwidth_gbps, hw.peak_tflops, "hardware.peak_* (the YAML)"), links,
                      "hardware.peak_* (the YAML)")
    if machine:
        peaks = datasheet_peaks(machine.gpu, dtype)
        return Target(peaks, links, peaks.source)
    if device == "cpu" and calibration and dtype in calibration.cpu_peaks:
        peaks = calibration.cpu_peaks[dtype]
        return Target(peaks, links, peaks.source)
    if device == "cpu":
        return Target(None, links, "no CPU peaks: set hardware.peak_memory_bandwidth_gbps and hardware.peak_tflops, "
                      "or --calibrate a results folder swept on this machine")
    return Target(None, links, "no GPU named: set hardware.gpu (e.g. h100-sxm) or hardware.peak_*")


def floored_as(config: SweepConfig, machine: Optional[Machine], placement: Placement, options: BackendOptions,
               dtype: str, calibration: Optional[Calibration]) -> Tuple[Target, Layout]:
    """The peaks and the layout an entry's floors use: on a named GPU every entry is floored there, a CPU one too."""
    if machine:
        placement = dataclasses.replace(placement, device="cuda")
    target = target_of(config, machine, placement.device, dtype, calibration)
    return target, Layout.of(placement, options.name, str(getattr(options, "offload", "none")))


def batch_sizes_of(config: SweepConfig, max_batch: int) -> List[int]:
    if isinstance(config.batch_sizes, list):
        return [int(b) for b in config.batch_sizes]
    if max_batch < 1:
        return [1]
    if config.batch_sizes == "auto":
        powers = [1 << k for k in range(max_batch.bit_length()) if 1 << k < max_batch]
        return powers + [max_batch]
    return sorted({1, max_batch})


def apply(floors: Floors, calibration: Calibration, label: str, engine: str) -> Tuple[Optional[Forecast], str]:
    """Floor time / fitted fraction, per phase; (None, why) where the calibration has no curve for the entry."""
    prefill, key = calibration.curve(label, engine, PREFILL)
    decode, _ = calibration.curve(label, engine, DECODE)
    if prefill is None or (floors.tpot is not None and decode is None):
        return None, (f"no calibration for {label} ({engine}): floor only; calibrated: "
                      f"{', '.join(calibration.engines)}")
    p = prefill.at(floors.batch_size)
    ttft = floors.ttft_floor_ms
    tpot_floor = floors.tpot_floor_ms
    d = decode.at(floors.batch_size) if decode is not None and tpot_floor is not None else None
    if d is None or tpot_floor is None:
        return Forecast(key, ttft / p.value, ttft / p.high, ttft / p.low, None, None, None, p, None), ""
    return Forecast(key, ttft / p.value, ttft / p.high, ttft / p.low, tpot_floor / d.value, tpot_floor / d.high,
                    tpot_floor / d.low, p, d), ""


def plan_points(config: SweepConfig, model: ModelSpec, backends: Registry[EngineClass], workload: PointWorkload,
                machine: Optional[Machine], calibration: Optional[Calibration]) -> List[PlanPoint]:
    options_of = {options.entry_label: options for options in config.backends}
    out = []
    for c in plan_capacity(config, model, backends, workload):
        options = options_of[c.label]
        loaded = model.loaded_as(options.quantization, c.placement.device)
        figures = ModelFigures(loaded.num_params, loaded.weights_bytes, kv_cache_bytes(loaded, 1, 1))
        target, layout = floored_as(config, machine, c.placement, options, model.dtype, calibration)
        for batch in batch_sizes_of(config, c.max_batch):
            floors = forecast = None
            note = "" if calibration else "no --calibrate: floor only"
            if c.estimate is None:
                note = c.reason
            elif target.peaks is None:
                note = target.why
            else:
                floors = floors_of(loaded, layout, target.peaks, target.links, batch, c.input_length,
                                   c.output_length)
                if calibration:
                    forecast, note = apply(floors, calibration, c.label, options.name)
            out.append(PlanPoint(c, batch, batch <= c.max_batch, target, figures, floors, forecast, note))
    return out

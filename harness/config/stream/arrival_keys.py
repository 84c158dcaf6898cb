"""The `stream` keys that shape arrivals beyond their rate: gamma's `burstiness`, `ramp` and `stages`, with their
checks (harness/config/stream/section.py holds the rest of the section; the times are
harness/scenarios/arrivals.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from harness.errors import UserError
from harness.fields import opt


@dataclass
class RampConfig:
    """`arrival: ramp`: the rate rises (or falls) linearly to the point's rate, then holds there."""

    start_rate: Optional[float] = opt(
        None, gt=0, unit="requests/s", help="The rate at t=0, requests/s (required with arrival: ramp).")
    duration_s: Optional[float] = opt(
        None, gt=0, unit="seconds", help="Seconds the ramp takes to reach the point's rate (required with "
                                      "arrival: ramp).")


@dataclass
class RateStage:
    """One stage of `arrival: stages`: a Poisson stream at `rate` for `duration_s`."""

    rate: Optional[float] = opt(None, gt=0, unit="requests/s", help="Requests/s during the stage (required).")
    duration_s: Optional[float] = opt(None, gt=0, unit="seconds", help="Seconds the stage lasts (required).")


def validate_shape(stream: Any) -> None:
    """Checks of a StreamConfig's shape keys: each belongs to its arrival process and must be more than 0. With
    arrival: stages the schedule replaces request_rates by its mean rate (one point per cap)."""
    arrival = stream.arrival
    if arrival != "gamma" and stream.burstiness != 1.0:
        raise UserError("stream.burstiness: shapes the gaps of stream.arrival: gamma; set it, or remove "
                        "stream.burstiness")
    _validate_ramp(stream.ramp, arrival == "ramp")
    if arrival != "stages":
        if stream.stages:
            raise UserError("stream.stages: is the schedule of stream.arrival: stages; set it, or remove stream.stages")
        return
    if not stream.stages:
        raise UserError("stream.stages: required with stream.arrival: stages, a list of {rate, duration_s}")
    for i, stage in enumerate(stream.stages):
        _require(f"stream.stages[{i}].rate", stage.rate, "requests/s", "")
        _require(f"stream.stages[{i}].duration_s", stage.duration_s, "seconds", "")
    total_s = sum(s.duration_s for s in stream.stages)
    stream.request_rates = [sum(s.rate * s.duration_s for s in stream.stages) / total_s]


def _validate_ramp(ramp: RampConfig, used: bool) -> None:
    if not used:
        if ramp.start_rate is not None or ramp.duration_s is not None:
            raise UserError("stream.ramp: is the ramp of stream.arrival: ramp; set it, or remove stream.ramp")
        return
    _require("stream.ramp.start_rate", ramp.start_rate, "requests/s", " with stream.arrival: ramp (the rate at t=0)")
    _require("stream.ramp.duration_s", ramp.duration_s, "seconds", " with stream.arrival: ramp (how long the ramp "
             "takes)")


def _require(key: str, value: Any, unit: str, why: str) -> None:
    """A key its arrival process needs (its range was checked as it was read: harness/config/kinds.py)."""
    if value is None:
        raise UserError(f"{key}: required{why}, a finite number of {unit} > 0")

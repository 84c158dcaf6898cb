#!/usr/bin/env python
"""Published measurements beside their roofline floors: the table of docs/guides/forecast.md ("Held to published
measurements"), from tests/fixtures/published.yaml. tests/test_published.py holds every figure to at least its
floor and the page's table to this one; run this script to rewrite the table after a change to the floors.

A published figure is a whole generate call (the prefill and every decode step), so it is held to the request's
floor (harness/plan/floors.py, `latency_floor_ms`), not to one step's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.config.sections import ModelConfig  # noqa: E402
from harness.model.hardware import datasheet_peaks  # noqa: E402
from harness.model.roofline import Shape, decode_bytes_per_step  # noqa: E402
from harness.model.spec import ModelSpec, preset_names, resolve_model  # noqa: E402
from harness.plan.engine import Placement  # noqa: E402
from harness.plan.floors import Links, floors_of  # noqa: E402

PUBLISHED = REPO / "tests" / "fixtures" / "published.yaml"
CARDS = REPO / "tests" / "fixtures" / "model-cards"
PAGE = REPO / "docs" / "guides" / "forecast.md"
START, END = "<!-- published floors: start (scripts/published_floors.py) -->", "<!-- published floors: end -->"


@dataclass(frozen=True)
class Held:
    """One published figure against its floor."""

    source: str
    url: str
    engine: str
    model: str
    where: str  # "8 x a100-sxm-80gb"
    batch_size: int
    measured_s: float  # the whole generate call, from the source's own measure
    floor_s: float  # the request's floor
    step_bound: str  # what binds a decode step
    mbu: float  # the decode bytes a step moves at mid-output over the measured mean step, as a fraction of peak

    @property
    def floor_fraction(self) -> float:
        return self.floor_s / self.measured_s


def _model(entry: dict) -> ModelSpec:
    name = entry["model"]
    section = (ModelConfig(preset=name, dtype=entry["dtype"]) if name in preset_names()
               else ModelConfig(name_or_path=str(CARDS / name), dtype=entry["dtype"]))
    return resolve_model(section).loaded_as(entry["quantization"], "cuda")


def measured_s(entry: dict, batch: int, figure: float) -> float:
    """The source's figure as the seconds of one generate call of `batch` sequences."""
    if entry["measure"] == "ms_per_token":  # wall time / (batch x new tokens)
        return figure * batch * entry["output_tokens"] / 1e3
    if entry["measure"] == "tokens_per_s":  # new tokens of one sequence per second
        return entry["output_tokens"] / figure
    raise ValueError(f"{PUBLISHED}: measure {entry['measure']!r}: ms_per_token or tokens_per_s")


def held() -> List[Held]:
    out = []
    for entry in yaml.safe_load(PUBLISHED.read_text()):
        model, n = _model(entry), entry["num_gpus"]
        # tensor: every GPU works on every layer at once; layers: Accelerate's device_map, one GPU at a time.
        placement = Placement("cuda", num_devices=n, tp_size=n if entry["layout"] == "tensor" else 1)
        peaks = datasheet_peaks(entry["gpu"], entry["dtype"])
        sharing = n if entry["layout"] == "tensor" else 1  # the GPUs whose bandwidth a step's bytes share
        for batch, figure in entry["figures"].items():
            floors = floors_of(model, placement, peaks, Links.of_gpu(entry["gpu"]), batch, entry["input_tokens"],
                               entry["output_tokens"])
            seconds = measured_s(entry, batch, figure)
            moved = decode_bytes_per_step(Shape.of(model), batch, entry["input_tokens"] + entry["output_tokens"] / 2)
            step_s = seconds / entry["output_tokens"]
            mbu = moved / step_s / (peaks.memory_bandwidth_gbps * 1e9 * sharing)
            assert floors.tpot is not None  # every source generates more than one token
            out.append(Held(entry["source"], entry["url"], entry["engine"], entry["model"], f"{n} x {entry['gpu']}",
                            batch, seconds, floors.latency_floor_ms / 1e3, floors.tpot.bound, mbu))
    return out


def table(rows: List[Held]) -> str:
    lines = ["| source | engine | model | GPUs | batch | measured (s) | floor (s) | floor / measured | binds | MBU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| [{r.source.split(',')[0]}]({r.url}) | {r.engine} | {r.model} | {r.where} | {r.batch_size} "
                     f"| {r.measured_s:.3g} | {r.floor_s:.3g} | {r.floor_fraction:.2f} | {r.step_bound} "
                     f"| {r.mbu:.2f} |")
    return "\n".join(lines)


def page_with(text: str, rendered: str) -> str:
    """`text` with the table between the markers replaced by `rendered`."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{rendered}\n{END}{tail}"


if __name__ == "__main__":
    PAGE.write_text(page_with(PAGE.read_text(), table(held())))
    print(PAGE)

"""The roofline floors of a point on named hardware: how fast it could possibly be, and which bound binds.

Each phase's time is the slowest of four bounds, each what the phase moves or computes over the rate it has:
memory bandwidth (weights and KV cache, docs/measurement.md's bytes), compute (its FLOPs), the interconnect
(tensor parallelism's all-reduces, a pipeline's hand-offs, ZeRO's weight all-gather) and the host link (weights
offloaded to host memory, read back every forward). Taking the slowest rather than the sum assumes the four overlap
perfectly: a lower bound, which is what a floor must be (docs/measurement.md, "The floors").

Nothing is loaded; the formulas are harness/model/roofline.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Union

import numpy as np

from harness.config.gpus import gpu_table
from harness.model.hardware import Peaks
from harness.model.roofline import (
    Shape,
    decode_bytes_per_step,
    decode_flops_per_step,
    prefill_bytes,
    prefill_flops,
)
from harness.model.spec import ModelSpec
from harness.plan.engine import Placement

MEMORY, COMPUTE, INTERCONNECT, HOST_LINK = "memory bandwidth", "compute", "interconnect", "host link"
# The engine whose entries stream offloaded weights (backends/generate/deepspeed_zero.py): named, not imported, as
# the library never imports backends.
ZERO_ENGINE = "deepspeed_zero"
# A request's decode steps summed exactly up to this many; past it, sampled (bytes and FLOPs are smooth in the context).
DECODE_SAMPLES = 64


@dataclass(frozen=True)
class Links:
    """Per device, each way, 1e9 bytes/s: to the other devices and to host memory. None: not in the table."""

    interconnect_gbps: Optional[float]
    host_link_gbps: Optional[float]

    @classmethod
    def of_gpu(cls, key: str) -> "Links":
        entry = gpu_table()[key]
        return cls(entry.get("interconnect_gbps"), entry.get("host_link_gbps"))


NO_LINKS = Links(None, None)  # a CPU: its ranks share one memory, so the memory bound already counts what they move


@dataclass(frozen=True)
class Layout:
    """How an entry spreads a step over its devices, as the floors need it."""

    device: str
    num_devices: int
    tp_size: int
    stages: int  # layer groups run one after another (pipeline parallelism, Accelerate's device_map)
    zero_ranks: int  # ZeRO-Inference: ranks that each hold 1/n of the weights; 0: not ZeRO
    offloaded: bool  # ZeRO's weights live in host memory (or on disk) between forwards

    @classmethod
    def of(cls, placement: Placement, engine: str = "", offload: str = "none") -> "Layout":
        """A CPU counts as one device whatever its ranks: its peaks are the whole machine's (hardware.py's probe)."""
        if placement.device != "cuda":
            return cls(placement.device, 1, 1, 1, 0, False)
        n = max(placement.num_devices, 1)
        if engine == ZERO_ENGINE:
            return cls("cuda", n, 1, 1, n, offload != "none")
        return cls("cuda", n, placement.tp_size, max(n // max(placement.tp_size, 1), 1), 0, False)


@dataclass(frozen=True)
class PhaseFloor:
    """One phase's floor: the binding bound's time and every bound's, seconds."""

    seconds: float
    bound: str
    bounds_s: Dict[str, float]


@dataclass(frozen=True)
class Floors:
    """A point's floors: TTFT (the prefill), TPOT (one decode step at mid-output context), the request, and the
    speeds they allow. TPOT and the per-user speed are None for a one-token output (no decode step)."""

    batch_size: int
    input_length: int
    output_length: int
    num_devices: int
    ttft: PhaseFloor
    tpot: Optional[PhaseFloor]
    latency_floor_ms: float

    @property
    def ttft_floor_ms(self) -> float:
        return self.ttft.seconds * 1e3

    @property
    def tpot_floor_ms(self) -> Optional[float]:
        return self.tpot.seconds * 1e3 if self.tpot else None

    @property
    def throughput_ceiling_tokens_per_s(self) -> float:
        return self.batch_size * self.output_length / (self.latency_floor_ms / 1e3)

    @property
    def per_gpu_ceiling_tokens_per_s(self) -> float:
        return self.throughput_ceiling_tokens_per_s / self.num_devices

    @property
    def per_user_ceiling_tokens_per_s(self) -> Optional[float]:
        return 1e3 / self.tpot_floor_ms if self.tpot_floor_ms else None


def _bounds(s: Shape, lay: Layout, peaks: Peaks, links: Links, moved: float, computed: float, weights: float,
            tokens: int) -> Dict[str, float]:
    """Seconds per bound for a forward that moves `moved` bytes (of them `weights`) and computes `computed` FLOPs
    over `tokens` tokens. Stages run one after another, so a pipeline divides the bytes per device but not the time."""
    bandwidth, flops = peaks.memory_bandwidth_gbps * 1e9, peaks.tflops * 1e12
    spread = lay.zero_ranks or lay.tp_size
    out = {MEMORY: moved / spread / bandwidth, COMPUTE: computed / spread / flops}
    if lay.zero_ranks:  # every rank runs every layer, so every rank reads all the weights each forward
        out[MEMORY] = (weights + (moved - weights) / spread) / bandwidth
    activation = tokens * s.hidden * s.dtype_bytes
    # Tensor parallelism: 2 all-reduces a layer (attention, MLP) of the activations; a ring sends 2(n-1)/n of each.
    sent = 2 * s.layers * activation * 2 * (lay.tp_size - 1) / lay.tp_size + (lay.stages - 1) * activation
    if lay.zero_ranks > 1:  # ZeRO-3: each rank gathers the (n-1)/n of the weights it does not hold
        sent += weights * (lay.zero_ranks - 1) / lay.zero_ranks
    if sent and links.interconnect_gbps:
        out[INTERCONNECT] = sent / (links.interconnect_gbps * 1e9)
    if lay.offloaded and links.host_link_gbps:  # each rank reads its 1/n share of the weights over its own link
        out[HOST_LINK] = weights / max(lay.zero_ranks, 1) / (links.host_link_gbps * 1e9)
    return out


def _phase(bounds: Dict[str, float]) -> PhaseFloor:
    bound = max(bounds, key=lambda k: bounds[k])
    return PhaseFloor(bounds[bound], bound, bounds)


def _decode_bounds(s: Shape, lay: Layout, peaks: Peaks, links: Links, batch: int, context: float) -> Dict[str, float]:
    return _bounds(s, lay, peaks, links, decode_bytes_per_step(s, batch, context),
                   decode_flops_per_step(s, batch, context), decode_bytes_per_step(s, batch, 0), batch)


def floors_of(model: ModelSpec, layout: Union[Layout, Placement], peaks: Peaks, links: Links, batch_size: int,
              input_length: int, output_length: int) -> Floors:
    """The floors of `batch_size` sequences of `input_length` prompt tokens and `output_length` output tokens.
    `model` as the entry loads it (ModelSpec.loaded_as: quantized weights count their own bytes); `peaks` one
    device's (a CPU: the machine's); a bare Placement is an engine without ZeRO (e.g. Placement("cuda", 8, 8):
    TP-8); `links` from the table (Links.of_gpu) or NO_LINKS."""
    if isinstance(layout, Placement):
        layout = Layout.of(layout)
    s = Shape.of(model)
    prompts = [input_length] * batch_size
    weights = decode_bytes_per_step(s, batch_size, 0)
    ttft = _phase(_bounds(s, lay=layout, peaks=peaks, links=links, moved=prefill_bytes(s, prompts),
                          computed=prefill_flops(s, prompts), weights=weights, tokens=batch_size * input_length))
    tpot = None
    decode_s = 0.0
    if output_length > 1:
        tpot = _phase(_decode_bounds(s, layout, peaks, links, batch_size, input_length + output_length / 2))
        decode_s = _decode_total_s(s, layout, peaks, links, batch_size, input_length, output_length)
    return Floors(batch_size, input_length, output_length, layout.num_devices, ttft, tpot,
                  (ttft.seconds + decode_s) * 1e3)


def _decode_total_s(s: Shape, lay: Layout, peaks: Peaks, links: Links, batch: int, input_length: int,
                    output_length: int) -> float:
    """Every decode step at its own context (input + step), each at its slowest bound, summed, as
    roofline_latency_s does: exactly up to DECODE_SAMPLES steps; beyond, the mean of DECODE_SAMPLES steps spread
    evenly (the midpoints of equal runs of steps) times the steps, so a 4,000-token output costs no more to plan."""
    steps = output_length - 1
    if steps <= DECODE_SAMPLES:
        contexts = input_length + np.arange(1, output_length, dtype=float)
    else:
        contexts = input_length + (np.arange(DECODE_SAMPLES) + 0.5) * steps / DECODE_SAMPLES + 0.5
    seconds = [_phase(_decode_bounds(s, lay, peaks, links, batch, float(c))).seconds for c in contexts]
    return float(np.mean(seconds)) * steps

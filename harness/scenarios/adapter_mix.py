"""Which LoRA adapter each request of a stream names (docs/measurement.md, "LoRA adapters"): drawn from a mix,
seeded, so every engine and every rate of a sweep is offered the same sequence of adapters.

`uniform`: each adapter alike. `zipf`: adapter k (0-based) with weight 1 / (k+1)^s over the N adapters, a finite
Zipf law as SGLang's LoRA benchmark draws it: a few hot adapters and a long tail, the mix a server that holds fewer
adapters than it serves (vLLM's --max-loras) must swap under. `trace`: as a replayed trace names them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import numpy as np

from harness.config.engine import LoraConfig
from harness.errors import UserError
from harness.scenarios.stream import StreamSpec


def adapter_name(index: int) -> str:
    """What a request names as its `model` to be served with adapter `index` (vLLM serves each as a model)."""
    return f"lora-{index}"


def mix_weights(adapters: int, mix: str, exponent: float = 1.0) -> np.ndarray:
    """Each adapter's probability of being named, summing to 1."""
    if mix == "uniform":
        return np.full(adapters, 1.0 / adapters)
    if mix == "zipf":
        weights = 1.0 / np.arange(1, adapters + 1, dtype=float) ** exponent
        return weights / weights.sum()
    raise ValueError(f"unknown mix {mix!r}")


def draw_adapters(num_requests: int, adapters: int, mix: str, exponent: float, seed: int) -> Tuple[int, ...]:
    """The adapter each of `num_requests` requests names, in arrival order: the same for the same arguments."""
    rng = np.random.default_rng([seed, adapters, num_requests])
    return tuple(int(i) for i in rng.choice(adapters, size=num_requests, p=mix_weights(adapters, mix, exponent)))


def with_adapters(stream: StreamSpec, lora: Optional[LoraConfig]) -> StreamSpec:
    """The stream with the adapter each request names, drawn from the entry's mix; as it was without a lora section."""
    if lora is None:
        return stream
    if lora.mix == "trace":  # check_traced: every replayed request gives one, each of the adapters made
        assert len(stream.traced_adapters) == stream.num_requests, "lora.mix: trace without the trace's adapters"
        drawn = stream.traced_adapters
    else:
        drawn = draw_adapters(stream.num_requests, lora.adapters, lora.mix, lora.exponent, lora.seed)
    return dataclasses.replace(stream, adapters=tuple(adapter_name(i) for i in drawn))


def check_traced(lora: LoraConfig, trace: Any, key: str) -> None:
    """With `mix: trace`, the replayed trace (harness/config/stream/traces.py's Trace, None without one) must give
    every request an adapter the entry makes; UserError naming the file's line otherwise."""
    if lora.mix != "trace":
        return
    if trace is None:
        raise UserError(f"{key}.mix: trace takes each request's adapter from stream.trace; set stream.arrival: trace, "
                        "or mix: uniform or zipf")
    for request in trace.requests:
        if request.adapter is None:
            raise UserError(f"{key}.mix: stream.trace: {trace.path}: line {request.line}: no adapter (with mix: trace "
                            "every replayed request names its adapter's index)")
        if request.adapter >= lora.adapters:
            raise UserError(f"{key}.adapters: stream.trace: {trace.path}: line {request.line} names adapter "
                            f"{request.adapter}, and {lora.adapters} are made (lora-0 to lora-{lora.adapters - 1})")

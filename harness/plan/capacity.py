"""`--plan`: for each backend entry and (input, output) pair, the largest batch the memory estimate fits, and the KV
cache tokens that leave room for. Nothing is loaded: the estimates are the ones `plan_sweep` skips points by
(harness/model/memory.py and each backend's `estimate_memory`), on this machine or the one `hardware.gpu` names.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional, Tuple

from harness.config.registry import Registry
from harness.plan.engine import EngineClass, Placement, PointWorkload
from harness.config.sweep import SweepConfig, entry_key
from harness.model.memory import MemoryEstimate, kv_cache_bytes
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint
from harness.plan.sweep import free_bytes, missing_devices
from harness.scenarios.batch_search import largest_fitting


@dataclass(frozen=True)
class Capacity:
    label: str
    placement: Placement
    input_length: int
    output_length: int
    budget_bytes: int
    max_batch: int  # 0: not even one sequence fits
    estimate: Optional[MemoryEstimate]  # at max_batch (at 1 when nothing fits); None when the entry cannot run here
    kv_tokens: Optional[int]  # KV cache tokens the budget leaves room for beside weights and activations
    reason: str = ""  # why the entry cannot run here, or why nothing fits


def _largest(cls, options, model: ModelSpec, input_length: int, output_length: int,
             budget: int) -> Tuple[int, MemoryEstimate]:
    """The largest batch within `budget` by the entry's estimate, and the estimate there (at 1 when none fits)."""
    def estimate(batch: int) -> MemoryEstimate:
        return cls.estimate_memory(options, model, batch, input_length, output_length)

    best = largest_fitting(lambda batch: estimate(batch).total_bytes <= budget)
    return best, estimate(max(best, 1))


def plan_capacity(config: SweepConfig, model: ModelSpec, backends: Registry[EngineClass], workload: PointWorkload) -> List[Capacity]:
    out = []
    kv_per_token = kv_cache_bytes(model, 1, 1)
    pairs = list(itertools.product(workload.input_lengths(), config.output_lengths))
    for i, options in enumerate(config.backends):
        cls = backends.get(options.name, f"{entry_key(config, i)}.name")
        placement = cls.resolve_placement(options)
        loaded = model.loaded_as(options.quantization, placement.device)
        missing = cls.unsupported(options, config.scenario, model) or missing_devices(placement)
        budget = 0 if missing else int(free_bytes(placement, config.cluster) * config.memory_fraction)
        for input_length, output_length in pairs:
            longest = workload.longest_input(SweepPoint(input_length, output_length, 1, workload.name))
            if missing:
                out.append(Capacity(options.entry_label, placement, input_length, output_length, 0, 0, None, None,
                                    missing))
                continue
            best, at = _largest(cls, options, loaded, longest, output_length, budget)
            room = budget - at.weights_bytes - at.activation_bytes
            reason = "" if best else f"one sequence needs an estimated {at.describe()}"
            out.append(Capacity(options.entry_label, placement, input_length, output_length, budget, best, at,
                                max(room, 0) // kv_per_token, reason))
    return out

"""Sweep plan: every (backend entry, point) to run, with its memory estimate and whether it fits.

The plan is computed before any model is loaded; `--dry-run` prints it and stops.
"""

from __future__ import annotations

import itertools
import math
from typing import List, Optional

from harness.config.registry import Registry
from harness.plan.engine import EngineClass, PointWorkload
from harness.config.sweep import SweepConfig, entry_key
from harness.model.hardware import available_bytes, cuda_device_count, planned_machine, usable_cpus
from harness.model.memory import GiB, MemoryEstimate
from harness.model.spec import ModelSpec
from harness.model.tokenizer import text_token_ids
from harness.plan.entry import EntryPlan
from harness.plan.points import BatchSearchPlan, PlannedPoint, SweepPoint
from harness.scenarios.adapter_mix import check_traced
from harness.scenarios.batch_search import DEFAULT_MAX_BATCH_SIZE


def sweep_points(config: SweepConfig, workload: PointWorkload) -> List[SweepPoint]:
    lengths = list(itertools.product(workload.input_lengths(), config.output_lengths))
    if config.batch_sizes == "auto":
        points = [SweepPoint(i, o, None, workload.name, batch_search=True) for i, o in lengths]
    elif config.batch_sizes is not None:  # scenario: batch
        points = [SweepPoint(i, o, b, workload.name) for (i, o), b in itertools.product(lengths, config.batch_sizes)]
    else:
        s = config.stream
        rates = [math.inf] if s.arrival == "burst" else [None] if s.request_rates == "auto" else s.request_rates
        points = [SweepPoint(i, o, None, workload.name, r, c)
                  for (i, o), r, c in itertools.product(lengths, rates, s.max_concurrency)]
    return sorted(points, key=lambda p: p.sort_key)


def plan_sweep(config: SweepConfig, model: ModelSpec, backends: Registry[EngineClass], workload: PointWorkload) -> List[EntryPlan]:
    """`backends` is backends/registry.py's BACKENDS and `workload` the sweep's built workload, handed down by the CLI."""
    plans = []
    for i, options in enumerate(config.backends):
        cls = backends.get(options.name, f"{entry_key(config, i)}.name")
        if options.lora is not None:  # the layers it names are the model's: refused here, before any server starts
            from harness.model.adapters import lora_layers

            lora_layers(model, options.lora, f"{entry_key(config, i)}.lora")
            check_traced(options.lora, getattr(workload, "trace", None), f"{entry_key(config, i)}.lora")
        options.validate_model(entry_key(config, i), model)
        placement = cls.resolve_placement(options)
        loaded = model.loaded_as(options.quantization, placement.device)  # what its estimates and roofline use
        missing = cls.unsupported(options, config.scenario, model) or missing_devices(placement)
        free = 0 if missing else free_bytes(placement, config.cluster)
        budget = int(free * config.memory_fraction)
        points = []
        for p in sweep_points(config, workload):
            estimate = cls.estimate_memory(options, loaded, estimate_batch(cls, options, p), workload.longest_input(p),
                                           p.output_length)
            reason = missing or cls.point_unsupported(options, p)
            over_memory = None if reason else memory_skip(estimate, budget, placement.device, config)
            search = None
            if p.batch_search and not (reason or over_memory):
                search = plan_batch_search(cls, options, loaded, p, workload.longest_input(p), budget,
                                           placement.device, config)
            points.append(PlannedPoint(p, estimate, reason or over_memory, over_memory is not None, search))
        plans.append(EntryPlan(options, cls, placement, budget, points, workload, loaded, missing))
    quantizing = any(plan.options.quantization != "none" for plan in plans)
    q = config.quality
    text_ids = text_token_ids(model, q.text, q.max_text_tokens) if q.text else None
    for plan in plans:
        plan.probe_logits = quantizing
        plan.perplexity_ids, plan.perplexity_window = text_ids, min(q.window_tokens, model.max_positions)
    # Entries without speculation, then unquantized ones, first: they are the baselines speculative and quantized
    # entries are compared with as their points finish (speed-up, tokens, logits).
    return sorted(plans, key=lambda plan: (plan.options.speculative is not None, plan.options.quantization != "none"))


def plan_batch_search(cls, options, model: ModelSpec, point: SweepPoint, longest_input: int, budget: int,
                      device: str, config: SweepConfig) -> BatchSearchPlan:
    from harness.scenarios.batch_search import largest_fitting  # it plans from this module's points

    cap = config.max_batch_size or DEFAULT_MAX_BATCH_SIZE
    estimated = largest_fitting(lambda n: cls.estimate_memory(options, model, n, longest_input, point.output_length)
                                .total_bytes <= budget, limit=cap)
    if device == "cuda" or estimated == cap:
        return BatchSearchPlan(estimated, cap, f"max_batch_size {cap}")
    return BatchSearchPlan(estimated, estimated, f"a larger batch's memory estimate is over memory_fraction "
                           f"({config.memory_fraction}) of free host memory")


def estimate_batch(cls, options, point: SweepPoint) -> int:
    """The batch a point's memory estimate is for. A stream's engine holds at most its cap, or its own
    batch limit (`stream_batch_limit`), or, with neither, one sequence per estimate (engines that
    preallocate, like vLLM, estimate their whole cache anyway). A batch search's is for one sequence:
    each batch it tries is held against its own estimate."""
    if point.scenario == "batch":
        return point.batch_size or 1
    limits = [n for n in (point.max_concurrency, cls.stream_batch_limit(options)) if n]
    return min(limits) if limits else 1


def missing_devices(placement) -> Optional[str]:
    """A YAML is valid on any machine: what this one (or the planned one) lacks turns into skipped points, not an
    error."""
    if placement.device == "cuda":
        present, unit = cuda_device_count(), "CUDA device(s)"
    else:
        present, unit = usable_cpus(), "CPU cores"
    if placement.devices_per_node <= present:  # every node is taken to be a machine like this one
        return None
    machine = planned_machine()
    where = f"{machine.num_gpus} x {machine.gpu} has" if machine and placement.device == "cuda" else "this machine has"
    per_node = " per node" if placement.nodes > 1 else ""
    return f"needs {placement.devices_per_node} {unit}{per_node}, {where} {present}"


def free_bytes(placement, cluster) -> int:
    """Free memory on the entry's devices on all its nodes: this machine's now, or all of the planned machine's GPUs'
    memory, once per node (each node taken to be like this one; nodes on loopback share this machine's)."""
    machine = planned_machine()
    if machine is not None and placement.device == "cuda":
        return machine.memory_bytes_per_gpu * placement.num_devices
    nodes = 1 if cluster.node_agents == "local" else placement.nodes
    return available_bytes(placement.device, placement.devices_per_node) * nodes


def memory_skip(estimate: MemoryEstimate, budget: int, device: str, config: SweepConfig) -> Optional[str]:
    if estimate.total_bytes <= budget:
        return None
    return (
        f"needs an estimated {estimate.describe()}; {budget / GiB:.1f} GiB allowed on {device} "
        f"(memory_fraction {config.memory_fraction} of free memory)"
    )

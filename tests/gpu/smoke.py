"""The GPU smoke sweep (yamls/gpu-smoke.yaml) and the checks the GPU suite holds its results to.

Each check reads one results folder: the tests call them on the sweep `conftest.sweep` ran, and they run just as
well by hand on any folder of that YAML (`Sweep(out=Path(...), ...)`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from subprocess import CompletedProcess
from typing import Callable, Dict, List, Optional, Tuple

import pytest
import yaml

from tests.conftest import REPO
from tests.contract import assert_csv_contract, processes_with, rows

SMOKE_YAML = REPO / "yamls" / "gpu-smoke.yaml"
# The YAML's entries, backends.0 ... backends.4 (hf, accelerate, deepspeed, vllm, deepspeed_zero): each one's label is
# its engine's name. The first, hf, is the reference the others' greedy tokens are compared with.
LABELS = tuple(entry["name"] for entry in yaml.safe_load(SMOKE_YAML.read_text())["backends"])
POINTS = 2  # batch sizes 1 and 8, input 128, output 32
NUM_BATCHES = 3
NO_CUDA = "needs a CUDA device"
REHEARSAL_ENV = "BENCH_GPU_SUITE_ON_CPU"
SWEEP_TIMEOUT_S = 2400  # four engine start-ups (vLLM's compile and CUDA-graph capture the longest)
# The same sweep on a CPU: what the rehearsal runs instead (vllm eager: compiling takes minutes on a CPU).
CPU_OVERRIDES = ["model.preset=tiny-llama", "model.dtype=fp32", "backends.0.device=cpu", "backends.1.device=cpu",
                 "backends.2.device=cpu", "backends.2.tp_size=2", "backends.3.device=cpu",
                 "backends.3.enforce_eager=true", "backends.3.kv_cache_memory_bytes=268435456", "backends.4.device=cpu"]
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

# tokens_identical_share against hf (the reference entry). Engines that run hf's own kernels on the same weights
# (accelerate: whole layers per device; deepspeed on one rank: no AutoTP) agree at every point on a CPU and in fp32,
# to the CPU suite's bound (tests/test_crosscheck.py). Tensor parallelism in bf16 sums each
# row-parallel layer's partial products in another order, rounded to bf16, and random weights leave near-ties
# between the top logits: once a token flips, the rest of its sequence differs. Splitting o_proj, down_proj and
# lm_head of llama-1b (these random weights, bf16) in 2, 4 and 8 flipped the greedy token at 4.7%, 7.8% and 6.3% of
# 256 positions (measured on a CPU), which leaves an expected share of 0.3-0.5 over 32 tokens, and anything from 0
# to 1 for one sequence. So there the share is pooled over the entry's points (9 sequences) and held to agreement far
# beyond chance: a wrong shard, wrong padding or other weights agree at ~1/32000 of the positions; bf16 numerics
# stay under 0.1 only if nearly every sequence flips within its first 3 tokens.
# On a GPU the same holds without tensor parallelism: cuBLAS chooses its kernels (and their summation order) by
# the operands' shapes and alignment, so two builds of one model need not round alike. Measured on an H200
# (2026-11-26, llama-1b, bf16): accelerate on one GPU agreed with hf at 100% at batch 1 and 93.4% at batch 8.
MIN_SHARE = 0.95
MIN_POOLED_SHARE_TP_BF16 = 0.1
# A reading of the CUDA allocator before the engine loaded is ~0 (a fresh worker allocated nothing yet); the other
# counters read far more at that instant: host RSS of a Python with torch imported (~400 MB), NVML's memory in
# use (the CUDA contexts, ~500 MB each).
ALLOCATOR_BEFORE_LOAD_MAX = 64 * 2**20
MAX_WATTS_PER_GPU = 1500  # above any datasheet TDP (B200: 1,000 W)


@lru_cache(maxsize=None)
def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def rehearsal() -> bool:
    """The CPU rehearsal: no CUDA device, and asked for with BENCH_GPU_SUITE_ON_CPU=1."""
    return not cuda_device_count() and os.environ.get(REHEARSAL_ENV) == "1"


def gpu_counts() -> List[int]:
    """1, and all of the machine's GPUs when it has more than one."""
    n = cuda_device_count()
    return [1] + ([n] if n > 1 else [])


def sweep_args(device: str, gpus: int) -> List[str]:
    """`key=value` overrides of the smoke YAML for this device and GPU count: on GPUs, accelerate, deepspeed and vllm
    (backends.1, .2, .3) spread over all `gpus` of them."""
    if device == "cpu":
        return CPU_OVERRIDES
    return [f"backends.1.num_devices={gpus}", f"backends.2.tp_size={gpus}", f"backends.3.tp_size={gpus}"]


def engine_class(label: str):
    """The backend class of an entry of the smoke YAML (its label is its engine's name)."""
    from backends.registry import BACKENDS

    return BACKENDS.get(label, label)


def same_weights() -> Tuple[str, ...]:
    """The entries whose greedy tokens are compared with the reference's (LABELS[0]): those whose engine builds the
    harness's random weights (`harness_random_weights`; harness/measure/crosscheck.py). vLLM draws its own dummy
    weights here (this YAML leaves its random_weights at dummy)."""
    return tuple(label for label in LABELS[1:] if engine_class(label).harness_random_weights)


def missing_engine(label: str) -> Optional[str]:
    """Why an entry of the smoke YAML cannot run here at all (`vllm is not installed`), or None: the reason the sweep
    records for its points (backends/base.py, `not_installed`)."""
    return engine_class(label).not_installed()


def installed_labels() -> Tuple[str, ...]:
    return tuple(label for label in LABELS if missing_engine(label) is None)


def needs_engine(label: str) -> None:
    """Skip a check of an engine this machine does not have, with the reason the sweep recorded."""
    reason = missing_engine(label)
    if reason is not None:
        pytest.skip(f"{label}: {reason}")


@dataclass
class Sweep:
    """One run of the smoke sweep: its results folder and what each entry was asked for."""

    out: Path
    device: str  # cuda, or cpu in the rehearsal
    gpus: int  # the GPU count it ran with (1 in the rehearsal)
    proc: Optional[CompletedProcess] = None
    marker: Optional[str] = None  # in the environment of every process it started

    @property
    def placements(self) -> Dict[str, Tuple[int, int]]:
        """Each entry's (num_devices, tp_size) as results.csv must state it: what its engine class resolves the options
        the manifest recorded to (`resolve_placement`, on this machine, where the sweep ran)."""
        from backends.registry import BACKENDS

        found = {}
        for entry in self.manifest()["backends"]:
            label = entry["label"]
            placement = engine_class(label).resolve_placement(BACKENDS.options(entry["options"], label))
            found[label] = (placement.num_devices, placement.tp_size)
        return found

    @property
    def model(self) -> str:
        return "tiny-llama" if self.device == "cpu" else "llama-1b"

    @property
    def dtype(self) -> str:
        return "fp32" if self.device == "cpu" else "bf16"

    def manifest(self) -> dict:
        return json.loads((self.out / "manifest.json").read_text())

    def entry(self, label: str) -> dict:
        return next(e for e in self.manifest()["backends"] if e["label"] == label)

    def results(self, label: Optional[str] = None) -> List[dict]:
        return [r for r in rows(self.out / "results.csv") if label is None or r["backend"] == label]

    def samples(self, label: str) -> List[dict]:
        return [s for s in rows(self.out / "samples.csv") if s["backend"] == label]


def needs_cuda(sweep: Sweep) -> None:
    """Skip a check that only means something on a GPU (the CPU rehearsal)."""
    if sweep.device != "cuda":
        pytest.skip(f"{NO_CUDA} (CPU rehearsal: {REHEARSAL_ENV}=1)")


# --- checks ------------------------------------------------------------------------------------------------------

def check_sweep_ran(sweep: Sweep) -> None:
    """Exit 0 (every point ok), the results files, every entry on the device asked for, nothing left running."""
    if sweep.proc is not None:
        assert sweep.proc.returncode == 0, sweep.proc.stdout[-3000:] + sweep.proc.stderr[-3000:]
    assert {"results.csv", "samples.csv", "manifest.json", "tokens.jsonl"} <= {p.name for p in sweep.out.iterdir()}
    for label in set(LABELS) - set(installed_labels()):
        assert {(r["status"], r["error"]) for r in sweep.results(label)} == {("skipped", missing_engine(label))}
    for label in installed_labels():
        entry = sweep.entry(label)
        assert entry["runtime"]["device"] == sweep.device, (label, entry["runtime"])
        assert (sweep.out / "logs" / f"{label}.log").exists()
    if sweep.marker is not None:
        assert not processes_with(sweep.marker)  # no rank, engine core or worker outlived the sweep


def check_results_contract(sweep: Sweep, label: str) -> None:
    """tests/contract.py's contract for one entry, plus the model and dtype it ran."""
    num_devices, tp_size = sweep.placements[label]
    assert_csv_contract(sweep.out, label, points=POINTS, num_batches=NUM_BATCHES, num_devices=num_devices,
                        tp_size=tp_size)
    mine = sweep.results(label)
    assert {(int(r["batch_size"]), int(r["input_length"]), int(r["output_length"])) for r in mine} == {
        (1, 128, 32), (8, 128, 32)}
    assert {(r["model"], r["dtype"]) for r in mine} == {(sweep.model, sweep.dtype)}


def check_placement(sweep: Sweep, label: str) -> None:
    """An entry the overrides spread over the GPUs (`sweep_args`) resolved to all of them, and reports what it built
    there in its own runtime keys (`SPREAD`)."""
    num_devices, tp_size = sweep.placements[label]
    if sweep.device == "cuda":
        assert num_devices == sweep.gpus, (label, num_devices, sweep.gpus)
    SPREAD[label](sweep, sweep.entry(label), num_devices, tp_size)


def _accelerate_layers(sweep: Sweep, entry: dict, num_devices: int, tp_size: int) -> None:
    """accelerate: its layers spread over its GPUs (only those, on more than one when it has several), all hooked."""
    runtime = entry["runtime"]
    assert runtime["num_devices"] == num_devices
    layers = runtime["layers_per_device"]
    if sweep.device == "cuda":
        assert set(layers) <= {str(i) for i in range(num_devices)}, layers
        assert len(layers) > 1 if num_devices > 1 else len(layers) == 1, layers
    else:
        assert set(layers) == {"cpu"}, layers
    assert sum(layers.values()) == runtime["architecture"]["num_hidden_layers"]
    assert runtime["hooked_blocks"] > 0


def _deepspeed_shards(sweep: Sweep, entry: dict, num_devices: int, tp_size: int) -> None:
    """deepspeed: AutoTP's shards (LinearAllreduce layers) over NCCL (gloo on the CPU)."""
    runtime = entry["runtime"]
    assert runtime["tp_size"] == tp_size and runtime["dtype"] == sweep.dtype
    if tp_size > 1:
        assert runtime["comm_backend"] == ("nccl" if sweep.device == "cuda" else "gloo"), runtime
        assert runtime["tp_layers"].get("LinearAllreduce", 0) > 0, runtime["tp_layers"]


def _vllm_tensor_parallel(sweep: Sweep, entry: dict, num_devices: int, tp_size: int) -> None:
    """vllm: its tensor-parallel size, and a KV cache."""
    assert entry["placement"]["tp_size"] == tp_size and entry["placement"]["num_devices"] == num_devices
    assert entry["runtime"]["kv_cache_capacity_tokens"] > 0


# What each engine the overrides spread over the GPUs reports of how it used them: runtime keys of its own (its
# backend's runtime_info), so a check per engine, by label (each entry's label is its engine's name).
SPREAD: Dict[str, Callable[[Sweep, dict, int, int], None]] = {
    "accelerate": _accelerate_layers, "deepspeed": _deepspeed_shards, "vllm": _vllm_tensor_parallel}


def check_same_architecture(sweep: Sweep) -> None:
    """Every engine built the model the manifest describes (vLLM derives its own shapes from the config)."""
    manifest = sweep.manifest()
    for label in installed_labels():
        assert sweep.entry(label)["runtime"]["architecture"] == manifest["model"]["architecture"], label


def check_token_crosscheck(sweep: Sweep) -> None:
    """Greedy tokens of the engines holding the harness's random weights agree with hf's (the reference) at every
    point; vLLM draws its own dummy weights, so it is compared with nothing."""
    described = sweep.manifest()["token_crosscheck"]
    reference = LABELS[0]
    compared = [label for label in same_weights() if label in installed_labels()]
    others = [label for label in LABELS[1:] if label not in same_weights()]
    assert described.startswith("tokens compared (same weights, greedy): "), described
    assert all(f"{label} with {reference}" in described for label in compared), described
    assert not any(f"{label} with" in described or f"with {label}" in described for label in others), described
    shares = {(r["backend"], int(r["batch_size"])): r["tokens_identical_share"] for r in sweep.results()}
    for batch_size in (1, 8):
        assert all(shares[(label, batch_size)] == "" for label in (reference, *others)), shares
    for label in compared:
        mine = {b: shares[(label, b)] for b in (1, 8)}
        assert "" not in mine.values(), f"{label}: no share at some point (reference tokens missing?): {mine}"
        if sweep.dtype != "fp32" and (sweep.placements[label][1] > 1 or sweep.device == "cuda"):
            # Pooled per sequence (every point has 32 output tokens): batch 8 weighs 8 times batch 1.
            pooled = sum(b * float(share) for b, share in mine.items()) / sum(mine)
            assert pooled >= MIN_POOLED_SHARE_TP_BF16, f"{label}: shares with hf {mine}, pooled {pooled:.3f}"
        else:
            assert all(float(share) >= MIN_SHARE for share in mine.values()), f"{label}: shares with hf {mine}"


def peak_memory_reader(sweep: Sweep, label: str):
    """The counter the harness reads `peak_memory_bytes` from for this entry, as its backend class builds it."""
    from backends.registry import BACKENDS
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepShape

    entry = sweep.entry(label)
    cls = BACKENDS.get(entry["options"]["name"], label)
    options = BACKENDS.options(entry["options"], label)
    model = resolve_model(ModelConfig(preset=sweep.model, dtype=sweep.dtype))
    return cls(options, model, SweepShape(8, 128, 32)).peak_memory


def check_peak_memory_source_and_range(sweep: Sweep, label: str) -> None:
    """hf, accelerate and deepspeed: the CUDA allocator's high-water mark (deepspeed: rank 0's device only).
    vLLM holds its memory in its engine's processes, where this process's allocator sees nothing: NVML's memory
    in use on its GPUs (harness/measure/peak_memory.py DeviceMemoryInUse). Either way: more than the bf16 weights on
    the devices read (rank 0's shard for deepspeed), less than those devices' total memory; ZeRO-Inference's device
    peak is below the weights, which its host peak holds."""
    from harness.measure.peak_memory import DeviceMemoryInUse, PeakMemory

    reader = peak_memory_reader(sweep, label)
    if label == "vllm":
        assert type(reader) is DeviceMemoryInUse and reader.num_devices == sweep.placements[label][0]
    else:
        assert isinstance(reader, PeakMemory) and reader.device == "cuda"
        assert type(reader).__name__ in ("PeakMemory", "RankDevicePeak", "HostAndDevicePeak"), type(reader)
    manifest = sweep.manifest()
    weights = manifest["model"]["num_params"] * DTYPE_BYTES[sweep.dtype]
    num_devices, tp_size = sweep.placements[label]
    read_devices = 1 if label in ("hf", "deepspeed") else num_devices  # deepspeed: rank 0's GPU
    gpus = manifest["hardware"]["gpus"]
    capacity = sum(g["memory_bytes"] for g in gpus[:read_devices])
    lower = weights / tp_size if label == "deepspeed" else weights
    for r in sweep.results(label):
        peak = int(r["peak_memory_bytes"])
        if label == "deepspeed_zero":  # the weights live in host memory: the GPU holds a layer or two at a time
            assert 0 < peak < weights < int(r["peak_host_memory_bytes"]), (label, r["batch_size"], peak, weights)
        else:
            assert lower < peak < capacity, (label, r["batch_size"], peak, lower, capacity)
        if label != "vllm":
            before = int(r["memory_before_load_bytes"])
            assert 0 <= before < ALLOCATOR_BEFORE_LOAD_MAX, f"{label}: {before} bytes before load: not the allocator"


def nvml_energy_or_skip(num_gpus: int) -> None:
    """Skip where the energy columns stay empty by design: no pynvml module, or GPUs without the counter."""
    pynvml = pytest.importorskip("pynvml", reason="pynvml (nvidia-ml-py) is not importable: no energy columns")
    try:
        pynvml.nvmlInit()
        for i in range(num_gpus):
            pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(i))
    except pynvml.NVMLError as e:
        pytest.skip(f"NVML has no total-energy counter on these GPUs ({e}): no energy columns")


def check_energy_columns(sweep: Sweep, label: str) -> None:
    """NVML energy filled on every row and timed batch, consistent with the row's own throughput and tokens."""
    num_devices = sweep.placements[label][0]
    for r in sweep.results(label):
        joules_per_token, watts = float(r["energy_j_per_output_token"] or "nan"), float(r["avg_power_w"] or "nan")
        assert joules_per_token > 0 and 0 < watts < MAX_WATTS_PER_GPU * num_devices, (label, r["batch_size"], r)
        # Both come from the same joules: power = energy per token x tokens per second.
        assert watts == pytest.approx(joules_per_token * float(r["throughput_tokens_per_s"]), rel=1e-4)
        batches = [s for s in sweep.samples(label) if s["batch_size"] == r["batch_size"]]
        assert len(batches) == NUM_BATCHES and all(float(s["energy_j"] or "nan") > 0 for s in batches), batches
        total_j = sum(float(s["energy_j"]) for s in batches)
        tokens = sum(int(s["output_tokens"]) for s in batches)
        assert joules_per_token == pytest.approx(total_j / tokens, rel=1e-4)


def check_vllm_cuda_graphs(sweep: Sweep) -> None:
    """vLLM ran as configured: not eager, CUDA graphs captured (cudagraph_mode other than NONE)."""
    runtime = sweep.entry("vllm")["runtime"]
    assert runtime["enforce_eager"] is False, runtime
    assert not re.search(r"\bNONE$", runtime["cudagraph_mode"]), runtime["cudagraph_mode"]


# --- make overhead on cuda ---------------------------------------------------------------------------------------

OVERHEAD_TOLERANCE = 0.02


def overhead_figures(stdout: str) -> list:
    """The figures an overhead path script prints (benchmarks/overhead/pairs.py: one `OVERHEAD {json}` line each)."""
    sys.path.insert(0, str(REPO / "benchmarks" / "overhead"))
    from pairs import parse

    figures = [f for f in map(parse, stdout.splitlines()) if f is not None]
    assert figures, stdout
    return figures

"""Peak memory bandwidth and FLOP/s of the devices an entry runs on: what MBU, MFU and the roofline are fractions
of (docs/measurement.md, "What the numbers mean").

GPU peaks are datasheet figures (harness/peaks.yaml), matched from the name the driver reports. CPU peaks are
measured on the machine by a short probe, with the threads the engines get: a STREAM-style triad and a
matrix-vector product (decode's own access pattern), each over data far larger than the last-level cache, and a
matmul in the sweep's dtype. A YAML `hardware:` section overrides either.

And what the machine has for a sweep: its free memory (host or GPUs), its usable cores, and the machine `--plan`
plans for instead of this one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional

from harness.config.gpus import gpu_table
from harness.errors import UserError
from harness.files import read_file
from harness.model import nvml

# Triad arrays: 3 x 256 MiB of fp32, far beyond any CPU's last-level cache, so the triad streams from DRAM.
TRIAD_ELEMENTS = 64 * 1024 * 1024
# The matrix of the matrix-vector probe: 256 MiB of fp32, read once per product, as decode reads its weights. A read
# stream gets more bandwidth than a triad (which also writes, and on most CPUs reads each line it writes first):
# 1.09x here (40.3 against 37.0 GB/s), and decode at batch 1 measured up to 1.23x the triad alone, an MBU above 1.
MATVEC_ROWS = 8192
PROBE_REPEATS = 10  # best of: a shared machine has moments of other work
# The probe's matmul doubles its size until one takes this long: long enough to reach the machine's rate, short
# enough that every sweep can afford the probe (about a second in all on 2 cores).
MATMUL_MIN_S = 0.05


@dataclass(frozen=True)
class Peaks:
    """One device's peaks for one dtype, and where they come from."""

    memory_bandwidth_gbps: float  # 1e9 bytes/s
    tflops: float  # dense, 1e12 FLOP/s
    source: str


def match_gpu(name: str) -> Optional[str]:
    """The table's key for a device name such as `NVIDIA H100 80GB HBM3` or `NVIDIA A100-SXM4-40GB`: the first entry
    all of whose `match` words are words of the name (so `l4` does not match an L40S)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    return next((key for key, entry in gpu_table().items() if set(entry["match"]) <= words), None)


@dataclass(frozen=True)
class Machine:
    """A machine from the table that `--plan` and `--dry-run` plan for instead of this one (hardware.gpu with
    hardware.num_gpus): its GPUs' count and memory replace what this machine has."""

    gpu: str
    num_gpus: int

    @property
    def memory_bytes_per_gpu(self) -> int:
        return int(gpu_table()[self.gpu]["memory_gb"] * 1024**3)


_planned: Optional[Machine] = None


@contextlib.contextmanager
def planning_for(machine: Optional[Machine]):
    """While planning (nothing is loaded), count GPUs and their memory as `machine`'s; None: this machine's."""
    global _planned
    before, _planned = _planned, machine
    try:
        yield
    finally:
        _planned = before


def planned_machine() -> Optional[Machine]:
    return _planned


def cuda_device_count() -> int:
    """GPUs of the machine the sweep is planned for: this one's, or the planned machine's (`planning_for`)."""
    if _planned is not None:
        return _planned.num_gpus
    import torch

    return torch.cuda.device_count()


def datasheet_peaks(key: str, dtype: str) -> Peaks:
    entry = gpu_table()[key]
    return Peaks(float(entry["memory_bandwidth_gbps"]), float(entry["tflops"][dtype]), f"datasheet: {key}")


def measure_cpu_peaks(dtype: str) -> Peaks:
    """The probe: bandwidth is the faster of the best of a few triads (a = b + s * c: 3 arrays moved, as STREAM
    counts) and the best of a few fp32 matrix-vector products (the matrix read once); FLOP/s the best of a few square
    matmuls in `dtype`, sized so that one takes at least MATMUL_MIN_S. Runs on torch's intra-op threads, the ones HF
    generate uses (vLLM's CPU workers are bound to the same cores: cpu_threads_bind: all)."""
    import torch

    triad_gbps, moved = _triad_gbps()
    matvec_gbps = _matvec_gbps()
    tflops, n = _matmul_tflops(dtype)
    return Peaks(max(triad_gbps, matvec_gbps), tflops,
                 f"measured: triad over 3 x {moved // 3 >> 20} MiB ({triad_gbps:.1f} GB/s) and a {MATVEC_ROWS}x"
                 f"{MATVEC_ROWS} fp32 matrix-vector product ({matvec_gbps:.1f} GB/s), the faster; a {n}x{n} {dtype} "
                 f"matmul; {torch.get_num_threads()} threads")


def _triad_gbps():
    import torch

    b, c = torch.full((TRIAD_ELEMENTS,), 1.0), torch.full((TRIAD_ELEMENTS,), 2.0)
    a = torch.empty(TRIAD_ELEMENTS)
    moved = 3 * TRIAD_ELEMENTS * b.element_size()
    best_s = min(_timed(torch.add, b, c, alpha=3.0, out=a) for _ in range(PROBE_REPEATS))
    return moved / best_s / 1e9, moved


def _matvec_gbps() -> float:
    import torch

    matrix, vector = torch.full((MATVEC_ROWS, MATVEC_ROWS), 0.5), torch.full((MATVEC_ROWS,), 1.0)
    out = torch.empty(MATVEC_ROWS)
    moved = (matrix.numel() + 2 * MATVEC_ROWS) * matrix.element_size()
    best_s = min(_timed(torch.mv, matrix, vector, out=out) for _ in range(PROBE_REPEATS))
    return moved / best_s / 1e9


def _matmul_tflops(dtype: str):
    import torch

    from harness.model.spec import TORCH_DTYPES

    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    n = 256
    while True:
        x, y = torch.rand(n, n).to(torch_dtype), torch.rand(n, n).to(torch_dtype)
        best_s = min(_timed(torch.mm, x, y) for _ in range(3))
        if best_s >= MATMUL_MIN_S or n >= 8192:
            return 2 * n**3 / best_s / 1e12, n
        n *= 2


def _timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def entry_peaks(device: str, dtype: str, hardware, gpu_names: List[str], cache: Path) -> Optional[Peaks]:
    """The peaks of one device of an entry: `hardware` (the YAML section) first, figure by figure; then the table
    (hardware.gpu, or the first GPU's reported name) on CUDA, the probe (cached in `cache`, per dtype) on a CPU.
    None where a GPU is not in the table and the YAML gives no figures."""
    found: Optional[Peaks] = None
    if device == "cuda":
        key = hardware.gpu or (match_gpu(gpu_names[0]) if gpu_names else None)
        found = datasheet_peaks(key, dtype) if key else None
    elif hardware.peak_memory_bandwidth_gbps is None or hardware.peak_tflops is None:
        found = cached_cpu_peaks(dtype, cache)
    bandwidth = hardware.peak_memory_bandwidth_gbps or (found.memory_bandwidth_gbps if found else None)
    tflops = hardware.peak_tflops or (found.tflops if found else None)
    if bandwidth is None or tflops is None:
        return None
    overridden = [k for k in ("peak_memory_bandwidth_gbps", "peak_tflops") if getattr(hardware, k) is not None]
    source = "; ".join(([found.source] if found and len(overridden) < 2 else [])
                       + [f"hardware.{k} (the YAML)" for k in overridden])
    return Peaks(float(bandwidth), float(tflops), source)


def cached_cpu_peaks(dtype: str, cache: Path) -> Peaks:
    """The probe's figures for `dtype`, measured once per results folder (a resumed sweep reuses them)."""
    try:
        stored = json.loads(read_file(cache, "peaks").decode("utf-8")) if cache.exists() else {}
        found = Peaks(**stored[dtype]) if isinstance(stored, dict) and isinstance(stored.get(dtype), dict) else None
    except (UserError, ValueError, TypeError, RecursionError):  # a damaged cache is measured again, not read
        stored, found = {}, None
    if found is None:
        stored = stored if isinstance(stored, dict) else {}
        stored[dtype] = asdict(measure_cpu_peaks(dtype))
        cache.write_text(json.dumps(stored, indent=2) + "\n")
        found = Peaks(**stored[dtype])
    return found


def available_bytes(device: str, num_devices: int = 1) -> int:
    """Free memory where the model will live: the devices' free memory, or the host's MemAvailable."""
    if device == "cuda":
        free = nvml.free_bytes(num_devices)  # no CUDA context in the sweep's process (harness/model/nvml.py)
        if free is not None:
            return free
        import torch

        return sum(torch.cuda.mem_get_info(i)[0] for i in range(num_devices))
    return host_available_bytes()


def host_available_bytes() -> int:
    return _meminfo_kib("MemAvailable") * 1024


def host_total_bytes() -> int:
    return _meminfo_kib("MemTotal") * 1024


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _meminfo_kib(key: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/meminfo")

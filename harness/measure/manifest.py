"""What a number was measured on: hardware, software versions, git commit, command line.

Every results folder gets a manifest.json so rows from different machines can be
compared (and trusted) months later.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from harness.measure.gpu_validity import gpu_settings
from harness.model.hardware import host_total_bytes, usable_cpus
from harness.scenarios.release import DEFAULT_POLICY as DEFAULT_RELEASE, release_record

REPO = Path(__file__).resolve().parents[2]
# The harness's own distributions, recorded in every manifest beside the engines' (each engine class names what it
# runs on, its `distributions`, and the app hands them to `build_manifest`). Looked up by distribution name without
# importing anything (importing vLLM takes seconds).
HARNESS_PACKAGES = ("numpy", "omegaconf", "mosaicml-cli")
# The device files through which torch.cuda reaches a GPU: NVIDIA's driver (CUDA builds) and AMD's (ROCm builds).
# Where none exists torch.cuda finds no device, so the sweep process need not import torch (2.5 s on this project's
# CPU machine) to learn that: a stream or server sweep, which runs no probe, then imports no torch at all.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def software_versions(engine_distributions: Sequence[str] = ()) -> Dict[str, str]:
    """Python's version and that of each distribution installed here, of the engines' and the harness's own."""
    versions = {"python": platform.python_version()}
    for name in dict.fromkeys((*engine_distributions, *HARNESS_PACKAGES)):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus_possible() -> bool:
    return any(os.path.exists(path) for path in GPU_DEVICE_FILES)


def gpu_info() -> List[Dict[str, object]]:
    if not gpus_possible():
        return []
    import torch

    if not torch.cuda.is_available():
        return []
    return [
        {"name": torch.cuda.get_device_name(i), "memory_bytes": torch.cuda.get_device_properties(i).total_memory}
        for i in range(torch.cuda.device_count())
    ]


def torch_cuda_version() -> Optional[str]:
    """`torch.version.cuda`, the CUDA the installed torch was built for (None: a CPU or ROCm build). Read from the
    `version.py` torch's build writes as plain assignments, without importing torch; imported only where that file
    cannot be read."""
    spec = importlib.util.find_spec("torch")  # finds the package without running it
    if spec is None:
        return None
    try:
        tree = ast.parse(Path(list(spec.submodule_search_locations or [])[0], "version.py").read_text())
        for node in tree.body:
            target: ast.expr
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                target, assigned = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, assigned = node.targets[0], node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id == "cuda":
                value = ast.literal_eval(assigned)
                if value is None or isinstance(value, str):
                    return value
    except (OSError, IndexError, SyntaxError, ValueError):
        pass
    import torch

    return torch.version.cuda


def hardware_info() -> Dict[str, object]:
    """The machine the sweep ran on. Each entry's worker records what its engine used (threads, devices) in the
    entry's `runtime`."""
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpus_usable": usable_cpus(),
        "ram_bytes": host_total_bytes(),
        "gpus": gpu_info(),
        # application and maximum clocks, power limit, persistence mode: what shapes every GPU timing
        # (docs/measurement.md, "A valid GPU point"); empty without NVML
        "gpu_settings": gpu_settings(),
        "gpu_driver": _nvidia_driver(),
        "cuda": torch_cuda_version(),
        "platform": platform.platform(),
    }


def hardware_label(device: str) -> str:
    """The `hardware` column: the accelerator's name, or the CPU model and how many cores the run may use."""
    if device == "cuda" and gpus_possible():
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    cpu = f"{cpu_model()} ({usable_cpus()} cores)"
    return cpu if device == "cpu" else f"{cpu}, no CUDA device"  # rows of an entry skipped for lack of GPUs


def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _nvidia_driver() -> Optional[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


# Environment variables that change what an engine does (kernels, threads, devices, collectives): recorded so a
# rerun can set them the same. Names only match by these prefixes or in full.
ENGINE_ENV_PREFIXES = ("VLLM_", "NCCL_", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LOCAL_SIZE",
                       "DS_ACCELERATOR", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_", "KMP_", "TOKENIZERS_PARALLELISM")


def engine_environment(env: Dict[str, str]) -> Dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENGINE_ENV_PREFIXES)}


def reproduce_command(commit: Optional[str], config_yaml: Path) -> str:
    """One line that reruns this sweep from the repo at its commit, with the resolved config the sweep wrote (every
    default and override already in it) and the same engine environment."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in engine_environment(dict(os.environ)).items())
    checkout = f"git checkout {commit.removesuffix('-dirty')} && " if commit else ""
    rerun = f"python benchmark.py {shlex.quote(str(config_yaml))} --output-dir {shlex.quote(str(config_yaml.parent))}-rerun"
    return checkout + (f"{env} " if env else "") + rerun


def build_manifest(config: dict, argv: List[str], model: dict, entries: List[dict],
                   engine_distributions: Sequence[str] = ()) -> Dict[str, object]:
    return {
        "command": [sys.executable, *argv],
        "environment": engine_environment(dict(os.environ)),
        "git_commit": git_commit(),
        "start_time": now_iso(),
        "end_time": None,
        "config": config,
        "model": model,
        "backends": entries,
        "software": software_versions(engine_distributions),
        "hardware": hardware_info(),
        "stream_release": stream_release(config),
    }


def stream_release(config: dict) -> Optional[Dict[str, str]]:
    """How a stream sweep's requests were released (harness/scenarios/release.py): the policy `stream.release` asked
    for and the mechanism that woke the loop (timerfd, or asyncio's timer where there is none, up to about a
    millisecond late); it bounds every send_slip_ms. None for a sweep of static batches: no stream ran."""
    if config.get("scenario") != "stream":
        return None
    return release_record((config.get("stream") or {}).get("release", DEFAULT_RELEASE))


RENAMED = {"accuracy": "value"}  # accuracy.csv's column for any metric's value: lm-eval's are not all accuracies


def accuracy_rows(manifest: dict) -> List[Dict[str, object]]:
    """accuracy.csv's rows: each entry's tasks as its `runtime.accuracy` (the harness's scoring) and `runtime.lm_eval`
    (lm-eval's) give them, with how it answered (docs/measurement.md, "Accuracy"); none for an entry not scored, or
    whose scoring failed (the manifest says why)."""
    rows: List[Dict[str, object]] = []
    for entry in manifest.get("backends") or ():
        runtime = entry.get("runtime") or {}
        for said in (runtime.get("accuracy"), runtime.get("lm_eval")):
            if isinstance(said, dict):
                rows += [{"backend": entry.get("label"), **{RENAMED.get(k, k): v for k, v in task.items()},
                          "evaluated": said.get("evaluated")} for task in said.get("tasks", ())]
    return rows

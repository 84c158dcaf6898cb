"""NVML, where the machine has it (`pynvml`, from nvidia-ml-py): the GPUs this process sees, read without a CUDA
context. A CUDA call such as `torch.cuda.mem_get_info` makes the process hold a context of about half a GB on the
GPU for the rest of its life, which the sweep's own process must not take from its engines (docs/results/
h200-20261128: its 0.54 GB showed up on the GPU as another process)."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple


def initialized(nvml: Any = None) -> Any:
    """pynvml, initialized, or None where there is none or no driver. `nvml`: a stand-in, for tests."""
    try:
        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml.nvmlInit()
        return nvml
    except Exception:  # noqa: BLE001 - no pynvml, no driver
        return None


def visible_handles(num_devices: int, nvml: Any = None) -> Optional[Tuple[Any, List[Any]]]:
    """(pynvml, handles of the first `num_devices` GPUs this process sees: CUDA_VISIBLE_DEVICES, by index or UUID,
    mapped to NVML's devices, which ignore it), or None where NVML cannot be read. `nvml`: a stand-in, for tests."""
    nvml = initialized(nvml)
    if nvml is None:
        return None
    try:
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        ids = visible[:num_devices] if visible else [str(i) for i in range(num_devices)]
        return nvml, [nvml.nvmlDeviceGetHandleByIndex(int(i)) if i.isdigit() else nvml.nvmlDeviceGetHandleByUUID(i)
                      for i in ids]
    except Exception:  # noqa: BLE001 - no such device
        return None


def free_bytes(num_devices: int, nvml: Any = None) -> Optional[int]:
    """Free memory of the first `num_devices` GPUs together, as NVML counts it; None without NVML."""
    found = visible_handles(num_devices, nvml)
    if found is None:
        return None
    nvml, handles = found
    try:
        return sum(int(nvml.nvmlDeviceGetMemoryInfo(h).free) for h in handles)
    except Exception:  # noqa: BLE001 - a device NVML lists but cannot read
        return None

"""What a point really used: peak memory of this process, of its process tree (engines that compute in child
processes), or of the GPUs (NVML), read between `reset` and `read` around each point.
"""

from __future__ import annotations

import ctypes
import os
from typing import Dict, List, Optional


class PeakMemory:
    """Peak memory of this process between `reset` and `read`, weights included.

    On CUDA: the allocator's high-water mark. On the host: the kernel's peak RSS (VmHWM),
    which Linux resets when "5" is written to /proc/self/clear_refs; where that is not
    allowed, the process-lifetime peak is reported instead (an upper bound).
    """

    def __init__(self, device: str):
        self.device = device

    def reset(self) -> None:
        if self.device == "cuda":
            import torch

            for i in range(torch.cuda.device_count()):
                torch.cuda.reset_peak_memory_stats(i)
            return
        release_freed_host_memory()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass

    def read(self) -> Optional[int]:
        if self.device == "cuda":
            import torch

            return sum(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count()))
        return process_peak_rss_bytes(os.getpid())

    def read_host(self) -> Optional[int]:
        """The host's peak RSS beside a device's peak, for engines that keep weights on the host (offload); None
        elsewhere (on the CPU, `read` is the host's)."""
        return None

    def current(self) -> Optional[int]:
        """What the same counter holds now: read before loading, the rest of a peak is what the engine added."""
        if self.device == "cuda":
            import torch

            return sum(torch.cuda.memory_allocated(i) for i in range(torch.cuda.device_count()))
        return process_rss_bytes(os.getpid())


def release_freed_host_memory() -> None:
    """Hand memory freed by earlier points back to the kernel (glibc's malloc_trim), so that the peak RSS of the
    next point starts from what is live, not from the largest earlier point's leftovers. No-op off glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def process_peak_rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmHWM") * 1024


def process_rss_bytes(pid: int) -> int:
    return _status_kib(pid, "VmRSS") * 1024


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def process_tree(root: int) -> List[int]:
    """`root` and all its descendants, from /proc (engines such as vLLM compute in child processes)."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


class ProcessTreeMemory(PeakMemory):
    """Peak RSS summed over this process and its descendants.

    A sum of per-process peaks bounds the true peak of the sum from above; the processes of an
    engine reach their peaks together (weights and KV cache are allocated up front), so the two
    are close in practice.
    """

    def __init__(self):
        super().__init__("cpu")

    def reset(self) -> None:
        release_freed_host_memory()  # this process's only: the engine's children keep theirs
        for pid in process_tree(os.getpid()):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass

    def read(self) -> int:
        return self._sum(process_peak_rss_bytes)

    def current(self) -> int:
        return self._sum(process_rss_bytes)

    @staticmethod
    def _sum(reading) -> int:
        total = 0
        for pid in process_tree(os.getpid()):
            try:
                total += reading(pid)
            except OSError:
                pass  # exited meanwhile
        return total


class DeviceMemoryInUse(PeakMemory):
    """GPU memory in use on the entry's devices, from NVML: for engines whose allocations live in
    other processes (vLLM's workers), where this process's allocator sees nothing. vLLM reserves
    its KV cache up front, so in-use after a point is its peak."""

    def __init__(self, num_devices: int):
        super().__init__("cuda")
        self.num_devices = num_devices

    def reset(self) -> None:
        pass

    def current(self) -> Optional[int]:
        return self.read()

    def read(self) -> Optional[int]:
        try:
            import pynvml

            pynvml.nvmlInit()
            return sum(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
                       for i in range(self.num_devices))
        except Exception:  # no NVML: report nothing rather than a wrong number
            return None

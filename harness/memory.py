"""Memory: what a point should need, what the machine has free, and what a point really used.

The estimate is deliberately simple and a little generous. Its job is to keep a sweep
from exhausting host memory (which kills the machine, not just the run) or from
spending minutes on a load that cannot fit; real out-of-memory errors on the device
are still caught and recorded as `oom` by the runner.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

from harness import config_view
from harness.models import ModelSpec

GiB = 1024**3
LOGITS_FP32_COPIES = 8  # see activation_bytes


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes

    def describe(self) -> str:
        return (
            f"{self.total_bytes / GiB:.1f} GiB (weights {self.weights_bytes / GiB:.1f}, "
            f"KV cache {self.kv_cache_bytes / GiB:.1f}, activations {self.activation_bytes / GiB:.1f})"
        )


def kv_cache_bytes(model: ModelSpec, batch_size: int, tokens: int) -> int:
    """Keys and values for every layer, with the model's real KV heads (GQA/MQA shrink this 4-8x).

    Sliding-window models are counted at full length: an over-estimate, never an under-estimate.
    """
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    return 2 * c.num_hidden_layers * kv_heads * head_dim * batch_size * tokens * model.dtype_bytes


def activation_bytes(model: ModelSpec, batch_size: int, input_length: int, eager_attention: bool = False) -> int:
    """Peak transient memory of the prefill, the largest step of a generate call.

    One layer's hidden states and MLP intermediates (gate, up, product) are live at once;
    logits are kept for the last position only, in fp32 copies: the head's output, the sampler's upcast,
    and one per logits processor (forced length, EOS suppression). Measured with HF generate on a CPU
    (tiny-llama, 256 sequences, input 4): 254 MB above the weights, about eight [batch, vocab] fp32 copies.
    Eager attention also materializes fp32-sized score matrices, as many at once as the family's attention keeps
    (harness/config_view.py, `eager_score_copies`: MPT 3); SDPA/flash kernels do not.
    """
    c = model.config
    tokens = batch_size * input_length
    layer = tokens * (4 * c.hidden_size + 3 * mlp_width_per_token(c)) * model.dtype_bytes
    logits = LOGITS_FP32_COPIES * batch_size * c.vocab_size * 4
    copies = config_view.eager_score_copies(c)
    scores = copies * batch_size * c.num_attention_heads * input_length**2 * 4 if eager_attention else 0
    return layer + logits + scores


def mlp_width_per_token(c) -> int:
    """The widest MLP one token goes through: its num_experts_per_tok experts on a MoE layer, the dense MLP on
    any other (planning's names: harness/config_view.py)."""
    moe_layers = getattr(c, "num_moe_layers", None) or 0
    widths = [c.moe_intermediate_size * c.num_experts_per_tok] if moe_layers else []
    if moe_layers < c.num_hidden_layers:
        widths.append(c.intermediate_size)
    return max(widths)


def estimate_point(
    model: ModelSpec, batch_size: int, input_length: int, output_length: int, eager_attention: bool = False
) -> MemoryEstimate:
    return MemoryEstimate(
        weights_bytes=model.num_params * model.dtype_bytes,
        kv_cache_bytes=kv_cache_bytes(model, batch_size, input_length + output_length),
        activation_bytes=activation_bytes(model, batch_size, input_length, eager_attention),
    )


def available_bytes(device: str, num_devices: int = 1) -> int:
    """Free memory where the model will live: the devices' free memory, or the host's MemAvailable."""
    if device == "cuda":
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

    def read(self) -> int:
        if self.device == "cuda":
            import torch

            return sum(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count()))
        return process_peak_rss_bytes(os.getpid())

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

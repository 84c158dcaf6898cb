"""GPU energy per timed batch: NVML's total-energy counters (millijoules since the driver loaded) of every GPU an
entry uses, read right before and right after each batch. Where NVML or the counter is missing (a CPU, a GPU
before Volta, no `pynvml` module: nvidia-ml-py, which vLLM's GPU build installs) nothing is read and the energy
columns stay empty: energy is measured, never estimated.
"""

from __future__ import annotations

from typing import List, Optional

from harness.model.nvml import visible_handles


class EnergyMeter:
    def __init__(self, nvml, handles: List[object]):
        self._nvml, self._handles = nvml, handles

    @classmethod
    def open(cls, device: str, num_devices: int) -> Optional["EnergyMeter"]:
        """A meter over the first `num_devices` GPUs this process sees (CUDA_VISIBLE_DEVICES, by index or UUID,
        mapped to NVML's devices, which ignore it), or None where energy cannot be read."""
        if device != "cuda":
            return None
        found = visible_handles(num_devices)
        if found is None:
            return None
        try:
            meter = cls(*found)
            meter.joules()  # the counter exists on every device, or no meter
            return meter
        except Exception:  # noqa: BLE001 - a GPU before Volta has no energy counter: no energy columns
            return None

    def joules(self) -> float:
        return sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles) / 1e3

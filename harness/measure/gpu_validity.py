"""Was a GPU point's timing valid? NVML read on a thread while the point's timed batches (or timed stream) run: SM
and memory clocks, power, temperature, the reasons NVML gives for clocks held down, memory held by other processes,
and, where the driver lets a container see them, uncorrected ECC errors and XID events (docs/measurement.md,
"A valid GPU point").

A point is `invalid` when something outside the engine slowed or shared the GPU while it was timed: a hardware or
thermal slowdown, another process on the GPU, an uncorrected ECC error or an XID event. It is `suspect` when the
SM clock fell well below its own median at a reading NVML gave no reason for. The GPU held at its power limit is not a fault: it
is how the card runs under this load, and what a user of it gets; its share of the time is a column of its own.
Without NVML (a CPU, no `pynvml`) nothing is read and every column stays blank: validity is measured, never
assumed.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from harness.model.nvml import initialized, visible_handles

# NVML's clock-event reason bits (nvml.h, nvmlClocksEventReason*): these four mean the GPU was slowed by its
# hardware or its temperature, which invalidates a timing; the power cap is reported apart (see the docstring).
SLOWDOWNS = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
             0x80: "power brake"}
POWER_CAP = 0x4
CLOCK_SM, CLOCK_MEM, TEMPERATURE_GPU = 1, 2, 0  # NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU
UNCORRECTED, VOLATILE = 1, 0  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
# Ten readings a second: enough to see a slowdown that lasts a tenth of a timed batch of a second, while the
# thread's wake-ups stay out of the way of a host-bound decode loop (each reading is a few NVML calls, GIL released).
INTERVAL_S = 0.1
# Set by the sweep's process for its workers: that process and everything under it are the sweep's, not others.
SWEEP_PID_ENV = "BENCH_SWEEP_PID"
# `suspect`: the SM clock's lowest reading this far below its median, with no reason NVML gave.
CLOCK_DIP = 0.10


@dataclass(frozen=True)
class Reading:
    """One look at the entry's GPUs: the slowest SM and memory clocks, summed power, the hottest GPU, the reason
    bits of all of them, and the other processes on them (pid -> bytes, 0 where NVML cannot say)."""

    sm_clock_mhz: float
    mem_clock_mhz: float
    power_w: Optional[float]
    temperature_c: Optional[float]
    reasons: int
    others: Dict[int, int]


@dataclass(frozen=True)
class GpuValidity:
    """One point's readings, summarized, with its verdict."""

    readings: int
    sm_clock_min_mhz: float
    sm_clock_median_mhz: float
    mem_clock_min_mhz: float
    # The lowest SM clock of the readings NVML gave no reason for (neither a slowdown nor the power cap, which
    # lowers the clock as designed: on the H200 to 1,575 MHz against a median of 1,980 at batch 32); None if none
    sm_clock_unexplained_min_mhz: Optional[float]
    temperature_max_c: Optional[float]
    power_max_w: Optional[float]
    slowdown_share: float  # readings with a slowdown reason (SLOWDOWNS)
    power_capped_share: float  # readings at the power limit
    slowdowns: Tuple[str, ...]  # the slowdown reasons seen
    other_pids: Tuple[int, ...]  # processes outside the entry seen on its GPUs
    other_memory_bytes: int  # the most they held at one reading
    ecc_errors: Optional[int]  # new uncorrected ECC errors over the point; None where NVML does not count them
    xids: Optional[Tuple[int, ...]]  # XID events over the point; None where NVML does not report them

    @property
    def verdict(self) -> Tuple[str, str]:
        """(`valid` | `suspect` | `invalid`, why): the reason names what was seen, so that a reader can judge."""
        faults = []
        if self.slowdown_share > 0:
            faults.append(f"{', '.join(self.slowdowns)} {self.slowdown_share:.0%} of the time")
        if self.other_pids:
            held = f" holding {self.other_memory_bytes / 1e9:.2f} GB" if self.other_memory_bytes else ""
            faults.append(f"{len(self.other_pids)} other process(es) on the GPU{held} (pid "
                          f"{', '.join(map(str, self.other_pids[:4]))})")
        if self.ecc_errors:
            faults.append(f"{self.ecc_errors} uncorrected ECC error(s)")
        if self.xids:
            faults.append(f"XID {', '.join(map(str, self.xids))}")
        if faults:
            return "invalid", "; ".join(faults)
        low = self.sm_clock_unexplained_min_mhz
        if low is not None and low < (1 - CLOCK_DIP) * self.sm_clock_median_mhz:
            return "suspect", (f"SM clock fell to {low:.0f} MHz, {1 - low / self.sm_clock_median_mhz:.0%} below its "
                               f"median {self.sm_clock_median_mhz:.0f} MHz, with no reason NVML gave")
        return "valid", ""


def _ancestors(pid: int) -> List[int]:
    """The parent, grandparent, ... of a process, from /proc (empty where it cannot be read: gone, or not Linux)."""
    chain: List[int] = []
    while pid > 1 and len(chain) < 64:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the field after the name, which may hold spaces
        except (OSError, ValueError, IndexError):
            break
        chain.append(pid)
    return chain


def summarize(readings: Sequence[Reading], ecc_errors: Optional[int],
              xids: Optional[Sequence[int]]) -> Optional[GpuValidity]:
    if not readings:
        return None
    sm = [r.sm_clock_mhz for r in readings]
    unexplained = [r.sm_clock_mhz for r in readings if not r.reasons & (sum(SLOWDOWNS) | POWER_CAP)]
    slowed = [r for r in readings if r.reasons & sum(SLOWDOWNS)]
    seen = 0
    for r in slowed:
        seen |= r.reasons
    others = sorted({pid for r in readings for pid in r.others})
    powers = [r.power_w for r in readings if r.power_w is not None]
    temperatures = [r.temperature_c for r in readings if r.temperature_c is not None]
    return GpuValidity(
        readings=len(readings), sm_clock_min_mhz=min(sm), sm_clock_median_mhz=statistics.median(sm),
        mem_clock_min_mhz=min(r.mem_clock_mhz for r in readings),
        sm_clock_unexplained_min_mhz=min(unexplained) if unexplained else None,
        temperature_max_c=max(temperatures) if temperatures else None, power_max_w=max(powers) if powers else None,
        slowdown_share=len(slowed) / len(readings),
        power_capped_share=sum(bool(r.reasons & POWER_CAP) for r in readings) / len(readings),
        slowdowns=tuple(name for bit, name in SLOWDOWNS.items() if seen & bit), other_pids=tuple(others),
        other_memory_bytes=max(sum(r.others.values()) for r in readings), ecc_errors=ecc_errors,
        xids=None if xids is None else tuple(xids))


def _optional(read, *args):
    """An NVML figure, or None where this GPU or driver does not give it (NotSupported, NoPermission)."""
    try:
        return read(*args)
    except Exception:  # noqa: BLE001 - pynvml raises one NVMLError subclass per return code
        return None


class GpuMonitor:
    """NVML readings of the entry's GPUs on a thread, between `start()` and `stop()` (one point's timed phase)."""

    def __init__(self, nvml, handles: List[object], interval_s: float = INTERVAL_S):
        self._nvml, self._handles, self._interval_s = nvml, handles, interval_s
        self._ours = self._entry_pids()
        self._events = self._xid_events()
        self._readings: List[Reading] = []
        self._xids: List[int] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._ecc_before: Optional[int] = None
        self.last: Optional[GpuValidity] = None  # the last timed phase's summary (`watching`)

    @classmethod
    def open(cls, device: str, num_devices: int, nvml=None) -> Optional["GpuMonitor"]:
        """A monitor of the first `num_devices` GPUs this process sees (as EnergyMeter maps them), or None where
        NVML cannot read their clocks. Opened after the engine loaded: its processes then hold the GPUs."""
        if device != "cuda":
            return None
        found = visible_handles(num_devices, nvml)
        if found is None:
            return None
        nvml, handles = found
        try:
            for h in handles:
                nvml.nvmlDeviceGetClockInfo(h, CLOCK_SM)  # the clocks are readable on every device, or no monitor
            return cls(nvml, handles)
        except Exception:  # noqa: BLE001 - a device NVML lists but cannot read: no validity columns
            return None

    def _processes(self) -> Dict[int, int]:
        found: Dict[int, int] = {}
        for h in self._handles:
            for p in _optional(self._nvml.nvmlDeviceGetComputeRunningProcesses, h) or ():
                found[int(p.pid)] = found.get(int(p.pid), 0) + int(p.usedGpuMemory or 0)
        return found

    def _entry_pids(self) -> FrozenSet[int]:
        """The processes that are the sweep's: its own process (SWEEP_PID_ENV, which may hold a CUDA context of its
        own) and every process under it (this worker, the ranks it started), where NVML's process ids are this
        namespace's; else (a container whose NVML reports the host's ids) whatever held the GPUs when the monitor
        opened, after the engine loaded."""
        present = set(self._processes())
        if os.getpid() not in present:
            return frozenset(present)
        root = int(os.environ.get(SWEEP_PID_ENV, os.getpid()))
        return frozenset(pid for pid in present if pid == root or root in _ancestors(pid))

    def _xid_events(self):
        try:
            events = self._nvml.nvmlEventSetCreate()
            for h in self._handles:
                self._nvml.nvmlDeviceRegisterEvents(h, XID_CRITICAL, events)
            return events
        except Exception:  # noqa: BLE001 - containers often may not register for events: XIDs unknown
            return None

    def _ecc(self) -> Optional[int]:
        counts = [_optional(self._nvml.nvmlDeviceGetTotalEccErrors, h, UNCORRECTED, VOLATILE) for h in self._handles]
        return None if any(c is None for c in counts) else sum(counts)

    def read(self) -> Reading:
        nvml, handles = self._nvml, self._handles
        powers = [_optional(nvml.nvmlDeviceGetPowerUsage, h) for h in handles]
        temperatures = [_optional(nvml.nvmlDeviceGetTemperature, h, TEMPERATURE_GPU) for h in handles]
        reasons_of = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        reasons = 0
        for h in handles:
            reasons |= _optional(reasons_of, h) or 0
        return Reading(
            sm_clock_mhz=min(nvml.nvmlDeviceGetClockInfo(h, CLOCK_SM) for h in handles),
            mem_clock_mhz=min(nvml.nvmlDeviceGetClockInfo(h, CLOCK_MEM) for h in handles),
            power_w=None if None in powers else sum(powers) / 1e3,
            temperature_c=None if None in temperatures else max(temperatures), reasons=reasons,
            others={pid: used for pid, used in self._processes().items() if pid not in self._ours})

    def _poll_xids(self) -> None:
        while self._events is not None:
            try:
                event = self._nvml.nvmlEventSetWait(self._events, 0)
            except Exception:  # noqa: BLE001 - NVML_ERROR_TIMEOUT: no event waiting
                return
            self._xids.append(int(event.eventData))

    def _sample(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._readings.append(self.read())
            self._poll_xids()

    def start(self) -> None:
        self._readings, self._xids = [self.read()], []
        self._poll_xids()  # events from before the point are not the point's
        self._xids = []
        self._ecc_before = self._ecc()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="gpu-validity", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """`start()` and `stop()` around a timed phase, its summary kept in `last`, also when the phase raised (an
        OOM row says what the GPU did up to it)."""
        self.last = None
        self.start()
        try:
            yield
        finally:
            self.last = self.stop()

    def stop(self) -> Optional[GpuValidity]:
        """The point's summary, with a last reading taken now: a phase shorter than the interval has two."""
        assert self._thread is not None, "stop() before start()"
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._readings.append(self.read())
        self._poll_xids()
        after = self._ecc()
        ecc = None if after is None or self._ecc_before is None else after - self._ecc_before
        return summarize(self._readings, ecc, None if self._events is None else self._xids)


def gpu_settings(nvml=None) -> List[Dict[str, object]]:
    """Per GPU, what was set before any run and shapes every timing: application and maximum clocks, the power
    limit, persistence mode (the manifest's hardware). Empty without NVML; a figure NVML withholds is None."""
    nvml = initialized(nvml)
    count = _optional(nvml.nvmlDeviceGetCount) if nvml is not None else None
    if not count:
        return []
    settings = []
    for i in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        limit = _optional(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
        settings.append({
            "index": i,
            "application_sm_clock_mhz": _optional(nvml.nvmlDeviceGetApplicationsClock, h, CLOCK_SM),
            "application_memory_clock_mhz": _optional(nvml.nvmlDeviceGetApplicationsClock, h, CLOCK_MEM),
            "max_sm_clock_mhz": _optional(nvml.nvmlDeviceGetMaxClockInfo, h, CLOCK_SM),
            "max_memory_clock_mhz": _optional(nvml.nvmlDeviceGetMaxClockInfo, h, CLOCK_MEM),
            "power_limit_w": None if limit is None else limit / 1e3,
            "persistence_mode": {0: False, 1: True}.get(_optional(nvml.nvmlDeviceGetPersistenceMode, h)),
        })
    return settings


def validity_columns(v: Optional[GpuValidity]) -> Dict[str, object]:
    """A point's validity columns in results.csv (harness/measure/columns/results.py): all empty without NVML."""
    if v is None:
        return {}
    verdict, reason = v.verdict
    return {"validity": verdict, "validity_reason": reason, "gpu_sm_clock_min_mhz": v.sm_clock_min_mhz,
            "gpu_sm_clock_median_mhz": v.sm_clock_median_mhz, "gpu_slowdown_share": v.slowdown_share,
            "gpu_power_capped_share": v.power_capped_share, "gpu_temperature_max_c": v.temperature_max_c,
            "gpu_other_memory_bytes": v.other_memory_bytes}

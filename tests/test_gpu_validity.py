"""Was a GPU point valid (harness/measure/gpu_validity.py, docs/measurement.md "A valid GPU point"): the monitor on
a fake NVML that plays what a real one reports (clocks, reason bits, processes, ECC counters, XID events, figures
a driver withholds), the verdict's rules, and the columns through the runner, the row, the read-back, the console
and the report, on the synthetic engine in process. Without NVML every column stays blank."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from app import console
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.measure.columns.results import RESULTS
from harness.measure.gpu_validity import (GpuMonitor, GpuValidity, Reading, gpu_settings, summarize,
                                          validity_columns)
from harness.measure.records import RunContext
from harness.measure.sink import result_row
from harness.plan.sweep import plan_sweep
from harness.run import runner as runner_module
from harness.run.runner import EntryRunner, RunEvents
from plots.report import validity_lines
from workloads.registry import WORKLOADS, build_workload


class NotSupported(Exception):
    """What pynvml raises for a figure this GPU or driver does not give (NVMLError_NotSupported)."""


class FakeNvml:
    """pynvml's functions over one state that a test changes between readings: `clocks` and `reasons` are consumed
    one value a reading, together (the last repeats), `processes` is read as it stands."""

    def __init__(self, devices=1, clocks=(1980,), reasons=(0,), power_mw=650_000, processes=None, ecc=0,
                 events=None, withheld=()):
        self.devices, self.clocks, self.reasons = devices, list(clocks), list(reasons)
        self.power_mw, self.ecc, self.withheld = power_mw, ecc, set(withheld)
        self.processes = processes if processes is not None else {os.getpid(): 16_000_000_000}
        self.events = events  # None: registering for events is refused, as in many containers
        self.reads = 0

    def _give(self, name, value):
        if name in self.withheld:
            raise NotSupported(name)
        return value

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return 0

    def nvmlDeviceGetClockInfo(self, handle, kind):
        if kind == 1:  # SM: the reading's clock
            return self.clocks[min(self.reads, len(self.clocks)) - 1] if self.reads else self.clocks[0]
        return 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._give("reasons", self.reasons[min(self.reads, len(self.reasons)) - 1] if self.reads else 0)

    def nvmlDeviceGetPowerUsage(self, handle):
        self.reads += handle == 0  # the first call of each reading (GpuMonitor.read): the next clock and reasons
        return self._give("power", self.power_mw)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self._give("temperature", 61 + handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes.items()] if handle == 0 \
            else []

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        return self._give("ecc", self.ecc)

    def nvmlEventSetCreate(self):
        if self.events is None:
            raise NotSupported("events")
        return "set"

    def nvmlDeviceRegisterEvents(self, handle, kinds, events):
        pass

    def nvmlEventSetWait(self, events, timeout_ms):
        if not self.events:
            raise TimeoutError("NVML_ERROR_TIMEOUT")
        return SimpleNamespace(eventData=self.events.pop(0))

    def nvmlDeviceGetApplicationsClock(self, handle, kind):
        return self._give("application clocks", 1980 if kind == 1 else 3201)

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return 1980 if kind == 1 else 3201

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetPersistenceMode(self, handle):
        return self._give("persistence", 1)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=150_000_000_000, free=140_000_000_000 - handle, used=10_000_000_000 + handle)


def watch(nvml, during=lambda nvml: None, devices=1):
    """A monitor over the fake, started, `during` run between the readings, stopped: the point's summary."""
    monitor = GpuMonitor.open("cuda", devices, nvml)  # in process: this process is the sweep
    assert monitor is not None
    monitor._interval_s = 0.005
    monitor.start()
    during(nvml)
    for _ in range(4):
        monitor._readings.append(monitor.read())
    return monitor.stop()


def test_a_gpu_nothing_slowed_or_shared_is_valid():
    v = watch(FakeNvml(clocks=(1980,), reasons=(0,)))
    assert v.verdict == ("valid", "")
    assert (v.sm_clock_min_mhz, v.sm_clock_median_mhz, v.slowdown_share, v.other_pids) == (1980, 1980, 0.0, ())
    assert v.temperature_max_c == 61 and v.power_max_w == 650 and v.ecc_errors == 0 and v.xids is None


def test_a_thermal_or_hardware_slowdown_invalidates_and_says_how_long():
    v = watch(FakeNvml(clocks=(1980, 1980, 1400, 1400, 1980, 1980), reasons=(0, 0, 0x40, 0x48, 0, 0)))
    verdict, reason = v.verdict
    assert verdict == "invalid"
    assert reason.startswith("hardware slowdown, hardware thermal slowdown ") and reason.endswith("% of the time")
    assert 0 < v.slowdown_share < 1


def test_the_power_cap_alone_is_how_the_card_runs_not_a_fault():
    v = watch(FakeNvml(reasons=(0x4,)))
    assert v.verdict == ("valid", "") and v.power_capped_share == 1.0 and v.slowdown_share == 0.0


def test_a_clock_lowered_by_the_power_cap_is_not_suspect():
    """The H200 at batch 32: 1,575 MHz at its lowest against a median of 1,980, a third of the readings at the power
    limit. The dip has its reason; only a dip at a reading without one is suspect."""
    v = watch(FakeNvml(clocks=(1980, 1980, 1575, 1600, 1980, 1980), reasons=(0, 0, 0x4, 0x4, 0, 0)))
    assert v.sm_clock_min_mhz == 1575 and v.verdict == ("valid", "") and 0 < v.power_capped_share < 1


def test_another_process_on_the_gpu_invalidates_with_what_it_held():
    def arrives(nvml):
        nvml.processes = {**nvml.processes, 999_999: 3_500_000_000}

    v = watch(FakeNvml(), arrives)
    assert v.verdict == ("invalid", "1 other process(es) on the GPU holding 3.50 GB (pid 999999)")
    assert v.other_memory_bytes == 3_500_000_000


def test_the_sweeps_own_process_and_everything_under_it_are_not_others(monkeypatch):
    """The sweep's process (BENCH_SWEEP_PID, set for its workers) may hold a CUDA context of its own, and a worker's
    ranks are its children: none of them is another process. A process outside the sweep (init, pid 1) is. On the
    H200 the sweep's own context showed up as another process on every point before this rule
    (docs/results/h200-20261128)."""
    monkeypatch.setenv("BENCH_SWEEP_PID", str(os.getppid()))  # this test process plays the worker
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        family = {os.getppid(): 540_000_000, os.getpid(): 16_000_000_000, child.pid: 1}
        assert watch(FakeNvml(processes=dict(family))).verdict == ("valid", "")

        def arrives(nvml):
            nvml.processes = {**nvml.processes, 1: 0}

        assert watch(FakeNvml(processes=dict(family)), arrives).verdict == ("invalid", "1 other process(es) on the "
                                                                                     "GPU (pid 1)")
        monkeypatch.delenv("BENCH_SWEEP_PID")  # in process (no worker): this process is the sweep's root
        assert watch(FakeNvml(processes=dict(family)), arrives).verdict[1].startswith("2 other process(es)")
    finally:
        child.kill()
        child.wait()


def test_a_worker_is_told_its_sweeps_process():
    from harness.run.launcher import _worker_env

    class Plan:  # what _worker_env reads of an EntryPlan
        class backend_cls:
            @staticmethod
            def launch_env(options, placement):
                return {}
        options = placement = None

    assert _worker_env(Plan())["BENCH_SWEEP_PID"] == str(os.getpid())


def test_where_nvml_reports_the_hosts_pids_the_entry_is_what_held_the_gpu_when_it_opened():
    """In a container NVML may give the host's process ids: this process is then not among them, and what held
    the GPU after the engine loaded is the entry; a process that comes later is another."""
    nvml = FakeNvml(processes={4242: 16_000_000_000})
    assert watch(nvml).verdict == ("valid", "")

    def arrives(n):
        n.processes = {4242: 16_000_000_000, 5151: 0}

    assert watch(FakeNvml(processes={4242: 1}), arrives).verdict == ("invalid", "1 other process(es) on the GPU "
                                                                               "(pid 5151)")


def test_an_ecc_error_or_an_xid_during_the_point_invalidates_one_before_it_does_not():
    def ecc(nvml):
        nvml.ecc += 2

    assert watch(FakeNvml(ecc=5), ecc).verdict == ("invalid", "2 uncorrected ECC error(s)")

    def xid(nvml):
        nvml.events.append(79)

    nvml = FakeNvml(events=[48])  # before the point: drained by start(), not the point's
    v = watch(nvml, xid)
    assert v.xids == (79,) and v.verdict == ("invalid", "XID 79")


def test_a_clock_dip_with_no_reason_is_suspect():
    v = watch(FakeNvml(clocks=(1980, 1980, 1500, 1980, 1980, 1980)))
    assert v.verdict == ("suspect", "SM clock fell to 1500 MHz, 24% below its median 1980 MHz, with no reason "
                                    "NVML gave")


def test_figures_a_driver_withholds_are_blank_never_guessed():
    v = watch(FakeNvml(withheld={"power", "temperature", "ecc", "reasons"}))
    assert (v.power_max_w, v.temperature_max_c, v.ecc_errors, v.xids) == (None, None, None, None)
    assert v.verdict == ("valid", "")
    assert validity_columns(v)["gpu_temperature_max_c"] is None


def test_two_gpus_read_as_the_slowest_clock_the_hottest_gpu_and_their_power_together():
    v = watch(FakeNvml(devices=2), devices=2)
    assert v.temperature_max_c == 62 and v.power_max_w == 1300


def test_no_monitor_without_a_gpu_or_nvml():
    assert GpuMonitor.open("cpu", 1, FakeNvml()) is None

    class Broken(FakeNvml):
        def nvmlInit(self):
            raise NotSupported("NVML_ERROR_LIBRARY_NOT_FOUND")

    assert GpuMonitor.open("cuda", 1, Broken()) is None
    assert summarize([], None, None) is None and validity_columns(None) == {}


def test_the_manifest_keeps_the_settings_that_shape_every_timing():
    [gpu] = gpu_settings(FakeNvml(withheld={"application clocks"}))
    assert gpu == {"index": 0, "application_sm_clock_mhz": None, "application_memory_clock_mhz": None,
                   "max_sm_clock_mhz": 1980, "max_memory_clock_mhz": 3201, "power_limit_w": 700.0,
                   "persistence_mode": True}


def test_every_verdict_is_a_value_results_csv_reads_back():
    for v in (watch(FakeNvml()), watch(FakeNvml(reasons=(0x20,))), watch(FakeNvml(clocks=(1980, 900, 1980)))):
        for name, value in validity_columns(v).items():
            cell = "" if value is None else str(value)
            assert RESULTS[name].problem(cell) is None, (name, cell)
    assert RESULTS["validity"].problem("fine") == "'fine' is not one of valid, suspect, invalid"


# --- through the runner, on the synthetic engine in process -------------------------------------------------------


def test_a_sweep_on_a_gpu_fills_the_columns_and_says_what_was_not_valid(tmp_path, model, monkeypatch, capsys):
    """The runner watches each point's timed batches (not the warm-up): a slowdown during the second point's
    batches makes that point invalid and leaves the first valid; the console and the report say which."""
    nvml = FakeNvml()
    monkeypatch.setattr(runner_module.GpuMonitor, "open", classmethod(lambda cls, device, n: cls(nvml, [0], 0.002)))
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, dtype: fp32}\nbackends: [{name: synthetic, "
                    "ttft_ms: 1, tpot_ms: 2}]\nbatch_sizes: [1, 2]\ninput_lengths: [16]\noutput_lengths: [8]\n"
                    "num_batches: 2\nnum_warmup_batches: 1\n")
    config = load_config(path, [], BACKENDS, WORKLOADS)
    [plan] = plan_sweep(config, model, BACKENDS, build_workload(config, model))
    context = RunContext("t", "synthetic", "tiny-llama", "fp32", "cpu", 1, 1)
    results = []

    def finished(result):
        results.append(result)
        nvml.reasons = [0x40]  # from the second point on, the GPU runs hot

    EntryRunner(plan, model, config, context, RunEvents(finished)).run(set())
    rows = [result_row(r) for r in results]
    assert [(r["batch_size"], r["validity"]) for r in rows] == [(1, "valid"), (2, "invalid")]
    assert rows[1]["validity_reason"] == "hardware thermal slowdown 100% of the time"
    assert rows[0]["gpu_sm_clock_median_mhz"] == 1980 and rows[0]["gpu_slowdown_share"] == 0.0

    text_rows = [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]
    console.print_summary(text_rows)
    out = capsys.readouterr().out
    assert "GPU validity: 1 of 2 timed points valid" in out
    assert "synthetic at bs 2 in=16 out=8: invalid: hardware thermal slowdown 100% of the time" in out
    table = pd.DataFrame(text_rows).assign(series="synthetic")
    lines = validity_lines(table)
    assert lines[0] == "## GPU validity" and lines[2].startswith("1 of 2 timed points valid")
    assert "**invalid** synthetic: bs 2 @ in 16/out 8: hardware thermal slowdown 100% of the time" in lines[4]


def test_a_cpu_sweep_has_no_validity_and_its_report_no_section(tmp_path, model):
    row = result_row(_one_point(tmp_path, model))
    assert all(row.get(name) is None for name in ("validity", "gpu_sm_clock_min_mhz"))
    assert validity_lines(pd.DataFrame([{"validity": ""}])) == []


def _one_point(tmp_path, model):
    path = tmp_path / "one.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, dtype: fp32}\nbackends: [{name: synthetic}]\n"
                    "batch_sizes: [1]\ninput_lengths: [16]\noutput_lengths: [4]\nnum_batches: 1\n")
    config = load_config(path, [], BACKENDS, WORKLOADS)
    [plan] = plan_sweep(config, model, BACKENDS, build_workload(config, model))
    results = []
    EntryRunner(plan, model, config, RunContext("t", "synthetic", "tiny-llama", "fp32", "cpu", 1, 1),
                RunEvents(results.append)).run(set())
    return results[0]


def test_a_validity_record_is_frozen():
    v = summarize([Reading(1980, 3201, 600.0, 60, 0, {})], 0, ())
    assert v is not None and v.sm_clock_unexplained_min_mhz == 1980
    assert isinstance(v, GpuValidity)
    with pytest.raises(AttributeError):
        v.readings = 2  # type: ignore[misc]


def test_the_sweeps_process_reads_free_gpu_memory_from_nvml_without_a_cuda_context(monkeypatch):
    """torch.cuda.mem_get_info would make the sweep's process hold a CUDA context (0.54 GB on the H200) for the
    whole sweep; NVML reads the same without one, and the CUDA call is the fallback where NVML is missing."""
    from harness.model import hardware, nvml

    assert nvml.free_bytes(2, FakeNvml(devices=2)) == 280_000_000_000 - 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert nvml.free_bytes(1, FakeNvml(devices=2)) == 140_000_000_000 - 1
    monkeypatch.setattr(nvml, "free_bytes", lambda n: 123)
    assert hardware.available_bytes("cuda", 1) == 123

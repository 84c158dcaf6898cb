"""The results contract every backend's rows must meet (docs/measurement.md), shared by the end-to-end tests."""

import csv
import os
import uuid

import pytest

from harness.measure.writers import RESULT_COLUMNS
from tests.conftest import run_benchmark

SHM = "/dev/shm"

MARKER = "BENCH_TEST_RUN"  # set in each benchmark.py started by a test, inherited by every worker: finds leftovers

REQUIRED = (
    "benchmark_name, backend, model, dtype, hardware, num_devices, tp_size, batch_size, input_length, "
    "output_length, num_batches, status, error, latency_ms_mean, latency_ms_p50, latency_ms_p90, latency_ms_p99, "
    "latency_ms_std, ttft_ms_mean, ttft_ms_p50, ttft_ms_p90, ttft_ms_p99, tpot_ms_mean, tpot_ms_p50, tpot_ms_p90, "
    "tpot_ms_p99, throughput_tokens_per_s, prefill_tokens_per_s, latency_per_output_token_ms, peak_memory_bytes, "
    "load_time_s"
).split(", ")


def write_sweep(path, backends: str, model: str = "preset: tiny-llama, dtype: fp32", batch_sizes="[1, 4]",
                input_lengths="[16, 64]", output_lengths="[1, 8]", num_batches=2, warmup=1):
    """A small random-weight sweep YAML for end-to-end tests; `backends` is the YAML list's items."""
    path.write_text(
        f"benchmark_name: tiny\nmodel: {{{model}, weights: random}}\nbackends: [{backends}]\n"
        f"batch_sizes: {batch_sizes}\ninput_lengths: {input_lengths}\noutput_lengths: {output_lengths}\n"
        f"num_batches: {num_batches}\nnum_warmup_batches: {warmup}\n"
    )
    return path


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def assert_invariants(r):
    """One ok row: throughput from mean latency (1%), latency = TTFT + (n - 1) x TPOT (5%), no TPOT for n = 1."""
    bs, n = int(r["batch_size"]), int(r["output_length"])
    latency, ttft = float(r["latency_ms_mean"]), float(r["ttft_ms_mean"])
    assert 0 < ttft <= latency
    assert float(r["throughput_tokens_per_s"]) == pytest.approx(bs * n / latency * 1000, rel=0.01)
    # The headline view's two speeds (docs/measurement.md, "Per GPU and per user"), to 0.1% as written.
    per_gpu = float(r["throughput_tokens_per_s"]) / int(r["num_devices"])
    assert float(r["output_tokens_per_s_per_gpu"]) == pytest.approx(per_gpu, rel=1e-3)
    if n > 1:
        assert latency == pytest.approx(ttft + (n - 1) * float(r["tpot_ms_mean"]), rel=0.05)
        assert float(r["output_tokens_per_s_per_user"]) == pytest.approx(1000 / float(r["tpot_ms_mean"]), rel=1e-3)
    else:
        assert r["tpot_ms_mean"] == r["tpot_ms_p99"] == r["output_tokens_per_s_per_user"] == ""


def assert_csv_contract(out, backend: str, points: int, num_batches: int, num_devices: int, tp_size: int):
    """Columns, context, invariants, and one sample per timed batch with the exact output length."""
    results = rows(out / "results.csv")
    assert list(results[0].keys()) == RESULT_COLUMNS and set(REQUIRED) <= set(RESULT_COLUMNS)
    mine = [r for r in results if r["backend"] == backend]
    assert len(mine) == points
    for r in mine:
        assert r["status"] == "ok", r["error"]
        assert (r["num_devices"], r["tp_size"], int(r["num_batches"])) == (str(num_devices), str(tp_size), num_batches)
        assert int(r["peak_memory_bytes"]) > 0 and float(r["load_time_s"]) > 0
        assert_invariants(r)
    samples = [s for s in rows(out / "samples.csv") if s["backend"] == backend]
    assert len(samples) == points * num_batches
    assert all(int(s["min_output_tokens"]) == int(s["output_length"]) for s in samples)


def run_marked(*args, fault: str = None):
    """benchmark.py with a marker in its environment (and a fault to inject); returns (process, marker)."""
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    if fault:
        env["BENCH_INJECT_FAULT"] = fault
    return run_benchmark(*args, "--no-plots", env=env), marker


def processes_with(marker: str):
    """Live processes whose environment carries `marker`: workers, ranks or engine children left behind."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"{MARKER}={marker}".encode() in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def shm_segments() -> set:
    """Names in /dev/shm: shared memory, RAM until unlinked, whoever created it."""
    return set(os.listdir(SHM))


def shm_held(pids=None) -> set:
    """The /dev/shm segments that these processes (every live one, by default) map or hold open."""
    held = set()
    for pid in pids if pids is not None else filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                held.update(line.rsplit("/dev/shm/", 1)[1].strip() for line in f if "/dev/shm/" in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(str(SHM) + "/"):
                    held.add(target[len(str(SHM)) + 1:])
        except OSError:
            continue
    return held


def remove_orphaned_shm(held: set) -> list:
    """Unlink the /dev/shm segments of `held` (what a test's engine held, read before the test killed it) that are
    still there and that no live process maps or holds open now; returns them.

    Only a clean shutdown unlinks an engine's queues; a test that SIGKILLs an engine, as an OOM killer would,
    leaves them behind, and on a machine that runs the suite again and again they add up to all of its RAM. Only
    the killed engine's own: a segment another test's engine has just created, and not yet mapped (a semaphore
    its spawned child is about to open), is not this test's to remove.
    """
    orphans = sorted((held & shm_segments()) - shm_held())
    for name in orphans:
        try:
            os.unlink(os.path.join(SHM, name))
        except FileNotFoundError:
            pass
    return orphans


def refused_argument(parse_args, argv, capsys) -> str:
    """A benchmark script's `parse_args(argv)` refusing: exit 2, no traceback; returns what it printed."""
    import pytest

    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    return err

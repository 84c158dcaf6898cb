"""Workers forked from a preloading process (harness/run/preload.py; docs/measurement.md, "Where a sweep's time
goes"): `preload_workers: false` starts new interpreters, and a preloading process that dies costs its entry's
points and no other. What each one imports, once, and how soon the later entries start is held on
tests/test_accuracy_e2e.py's sweep, whose hf and vLLM entries already run."""

import collections
import datetime
import decimal
import fractions
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import REPO, run_benchmark
from tests.contract import MARKER, processes_with, rows

BASE = """model: {preset: tiny-llama, weights: random, dtype: fp32}
batch_sizes: [1]
input_lengths: [16]
output_lengths: [8]
num_batches: 2
num_warmup_batches: 1
"""


def runtimes(out):
    return {b["label"]: b["runtime"] for b in json.loads((out / "manifest.json").read_text())["backends"]}


@pytest.mark.engine
def test_preload_workers_false_starts_a_new_interpreter_per_entry(tmp_path):
    (tmp_path / "s.yaml").write_text(BASE + "benchmark_name: fresh\nbackends: [{name: synthetic}]\n")
    proc = run_benchmark(tmp_path / "s.yaml", "preload_workers=false", "--output-dir", tmp_path / "out",
                         "--no-plots")
    assert proc.returncode == 0, proc.stderr
    assert runtimes(tmp_path / "out")["synthetic"]["worker_start"] == "new interpreter"
    assert rows(tmp_path / "out" / "results.csv")[0]["status"] == "ok"


def preloading_process(marker: str) -> int:
    """The sweep's preloading process: of the processes with its command line (its forked workers keep it), the
    one whose parent is not one of them."""
    found = {}
    for pid in processes_with(marker):
        try:
            if b"harness.run.preload" in open(f"/proc/{pid}/cmdline", "rb").read():
                stat = open(f"/proc/{pid}/stat").read()
                found[int(pid)] = int(stat[stat.rfind(")") + 2:].split()[1])
        except OSError:
            pass
    (root,) = [pid for pid, parent in found.items() if parent not in found]
    return root


@pytest.mark.engine
def test_a_preloading_process_killed_mid_entry_costs_that_entrys_points_and_the_sweep_goes_on(tmp_path):
    """Its worker dies with it (PR_SET_PDEATHSIG); the next entry gets a new one."""
    (tmp_path / "s.yaml").write_text("""benchmark_name: preload-killed
model: {preset: tiny-llama, weights: random, dtype: fp32}
backends:
  - {name: synthetic, label: slow, ttft_ms: 20, tpot_ms: 10}
  - {name: synthetic, label: next}
batch_sizes: [1, 2, 4, 8]
input_lengths: [16]
output_lengths: [24]
num_batches: 3
num_warmup_batches: 1
""")
    marker = uuid.uuid4().hex
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(tmp_path / "s.yaml"), "--output-dir",
                             str(out), "--no-plots"], cwd=REPO, env={**os.environ, MARKER: marker},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "results.csv").exists() or not rows(out / "results.csv"):
            assert proc.poll() is None and time.monotonic() < deadline, "the first point never finished"
            time.sleep(0.05)
        os.kill(preloading_process(marker), signal.SIGKILL)
        assert proc.wait(timeout=60) == 1, proc.stderr.read()
    finally:
        proc.kill()
    status = {(r["backend"], r["batch_size"]): (r["status"], r["error"]) for r in rows(out / "results.csv")}
    assert status[("slow", "1")] == ("ok", "")
    errors = [status[("slow", b)] for b in ("4", "8")]
    assert all(s == "error" for s, _ in errors) and "worker died (SIGKILL)" in errors[0][1], errors
    assert [status[("next", b)] for b in ("1", "2", "4", "8")] == [("ok", "")] * 4
    runtime = runtimes(out)
    assert runtime["next"]["worker_start"].startswith("forked from a preloading process that imported")
    assert processes_with(marker) == []


@pytest.mark.parametrize("protocol", [2, 4, pickle.HIGHEST_PROTOCOL])
def test_the_modules_a_job_pickle_names_are_read_without_unpickling_it(tmp_path, protocol):
    """What the preloading process imports for a job beside the worker's modules: every module its pickle takes a
    class or function from (GLOBAL before protocol 4, STACK_GLOBAL after, its strings memoized and fetched again),
    in order, each once; a forked worker then unpickles its job without importing anything."""
    from harness.run.preload import pickled_modules

    job = {"when": datetime.date(2026, 11, 29), "shares": [fractions.Fraction(1, 3), fractions.Fraction(2, 3)],
           "counts": collections.Counter(a=1), "again": datetime.date(2026, 11, 30), "dtype": decimal.Decimal("1.5")}
    path = tmp_path / "job.pkl"
    path.write_bytes(pickle.dumps(job, protocol=protocol))
    read = pickled_modules(str(path))
    if protocol == 2:  # bytes (a date's state) are written as a call of _codecs.encode before protocol 3
        assert read.pop(1) == "_codecs"
    assert read == ["datetime", "fractions", "collections", "decimal"]

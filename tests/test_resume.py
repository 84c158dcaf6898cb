"""A killed sweep loses at most the point in flight; `--resume` completes it with no duplicate rows. On the null engine
(backends/synthetic.py), its batches slowed so that a kill lands mid-sweep: what is tested is the harness's
bookkeeping, not any engine's."""

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, run_benchmark

SWEEP = (
    "benchmark_name: resume\n"
    "model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
    "backends: [{name: synthetic, ttft_ms: 20, tpot_ms: 10}]\n"  # about 1 s a point
    "batch_sizes: [1, 2, 4, 8]\ninput_lengths: [16, 32]\noutput_lengths: [24]\n"
    "num_batches: 3\nnum_warmup_batches: 1\n"
)


def data_rows(path):
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def default_sigint():
    """Ctrl-C as a terminal's sweep gets it. A test run started in the background (`make test &` in a script)
    inherits SIGINT ignored, as shells ignore it for background jobs, and Python keeps an ignored SIGINT ignored: the
    sweep would never see the signal this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(yaml, out):
    return subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(yaml), "--output-dir", str(out)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)


def wait_for_rows(proc, path, n, timeout=120):
    deadline = time.monotonic() + timeout
    while len(data_rows(path)) < n:
        assert proc.poll() is None, f"sweep ended early: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "sweep too slow to reach the kill point"
        time.sleep(0.05)


def keys(rows):
    return [(r["batch_size"], r["input_length"], r["output_length"]) for r in rows]


@pytest.fixture
def yaml(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


KILLED = (
    "benchmark_name: killed\n"
    "model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
    # about 0.3 s a point; a label that would leave the folder as a file name
    "backends: [{name: synthetic, ttft_ms: 20, tpot_ms: 6, label: '../../killed entry'}]\n"
    "batch_sizes: [1, 2, 4, 8, 16]\ninput_lengths: [16, 32]\noutput_lengths: [8, 16, 24, 32]\n"
    "num_batches: 2\nnum_warmup_batches: 1\n"
)
POINTS = {(str(b), str(i), str(o)) for b in (1, 2, 4, 8, 16) for i in (16, 32) for o in (8, 16, 24, 32)}


@pytest.mark.engine
def test_forty_points_killed_twenty_times_end_with_every_point_once(tmp_path):
    """kill -9 of the sweep at 20 random moments (seeded), each followed by --resume: the rows measured before each
    kill are untouched (a partial last line, where a kill cut one, is set aside: tests/test_cut_files.py cuts every
    byte), and in the end every point is there exactly once, every row of every file whole."""
    from harness.measure.columns.readback import read_back
    from harness.measure.writers import DECLARED

    yaml = tmp_path / "killed.yaml"
    yaml.write_text(KILLED)
    out, moments = tmp_path / "out", random.Random(48)
    whole = []
    for kill in range(20):
        proc = subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(yaml), "--output-dir", str(out),
                                 "--no-plots", *(["--resume"] if kill else [])], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            time.sleep(moments.uniform(0.4, 1.8))  # a sweep starts in about 1 s: before, in and between points
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker, as a machine that loses power would
            proc.wait()
        rows = read_back(out / "results.csv", DECLARED["results.csv"]).rows
        assert rows[:len(whole)] == whole, f"kill {kill}: a row measured before was changed or lost"
        whole = rows
    assert 0 < len(whole) < len(POINTS), "the kills should land mid-sweep"
    proc = run_benchmark(yaml, "--output-dir", out, "--resume", "--no-plots")
    assert proc.returncode == 0, proc.stderr
    for name, declared in DECLARED.items():
        assert not read_back(out / name, declared).damaged if (out / name).exists() else name != "results.csv"
    rows = data_rows(out / "results.csv")
    assert rows[:len(whole)] == [dict(r) for r in whole]
    assert len(rows) == len(set(keys(rows))) == 40 and set(keys(rows)) == POINTS
    samples = data_rows(out / "samples.csv")
    assert len(samples) == 40 * 2 and len({(*k, s["batch_index"]) for k, s in zip(keys(samples), samples)}) == 80
    (entry,) = json.loads((out / "manifest.json").read_text())["backends"]
    assert entry["label"] == "../../killed entry" and (out / entry["log"]).parent == out / "logs"
    assert (out / entry["log"]).is_file() and not (tmp_path / "killed entry.log").exists()


@pytest.mark.engine
def test_ctrl_c_keeps_finished_points(yaml, tmp_path):
    out = tmp_path / "out"
    proc = start(yaml, out)
    wait_for_rows(proc, out / "results.csv", 2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "Traceback" not in proc.stderr.read()
    rows = data_rows(out / "results.csv")
    assert 2 <= len(rows) < 8 and all(r["status"] == "ok" for r in rows)
    assert len(data_rows(out / "samples.csv")) == 3 * len(rows)
    # the stopped entry's time counts: its points' warm-up and timed batches are in the manifest's work
    budget = json.loads((out / "manifest.json").read_text())["time_budget_s"]
    assert budget["work_s"] >= len(rows) * 3 * 0.25, budget  # each timed batch sleeps 20 + 23 x 10 ms


@pytest.mark.engine
def test_resume_refuses_a_different_sweep(yaml, tmp_path):
    out = tmp_path / "out"
    assert run_benchmark(yaml, "--output-dir", out, "batch_sizes=[1]", "input_lengths=[16]").returncode == 0
    proc = run_benchmark(yaml, "--output-dir", out, "--resume", "seed=1")
    assert proc.returncode == 2
    assert proc.stderr == f"error: --resume: {out} was measured with seed=0, this config has 1; use a new --output-dir\n"
    # a larger sweep over the same model resumes, adding only the new points
    proc = run_benchmark(yaml, "--output-dir", out, "--resume", "batch_sizes=[1,2]", "input_lengths=[16]")
    assert proc.returncode == 0, proc.stderr
    assert keys(data_rows(out / "results.csv")) == [("1", "16", "24"), ("2", "16", "24")]

"""A killed sweep loses at most the point in flight; `--resume` completes it with no duplicate rows. On the null engine
(backends/synthetic.py), its batches slowed so that a kill lands mid-sweep: what is tested is the harness's
bookkeeping, not any engine's."""

import csv
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


@pytest.mark.engine
def test_kill_9_then_resume_completes_without_duplicates(yaml, tmp_path):
    out = tmp_path / "out"
    proc = start(yaml, out)
    wait_for_rows(proc, out / "results.csv", 3)
    proc.kill()
    proc.wait()
    before = data_rows(out / "results.csv")
    assert 3 <= len(before) < 8, "the kill should land mid-sweep"

    proc = run_benchmark(yaml, "--output-dir", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    after = data_rows(out / "results.csv")
    assert after[: len(before)] == before  # rows measured before the kill are untouched
    assert sorted(keys(after)) == sorted({(str(b), str(i), "24") for b in (1, 2, 4, 8) for i in (16, 32)})
    assert len(set(keys(after))) == len(after) == 8
    samples = data_rows(out / "samples.csv")
    assert len(samples) == 8 * 3 and len(set((*k, s["batch_index"]) for k, s in zip(keys(samples), samples))) == 24


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

"""Points that cannot fit are skipped before anything is loaded: 70B on this machine ends in seconds."""

import csv
import re
import time

import pytest

from backends.registry import BACKENDS
from harness.config.sections import ModelConfig
from harness.config.sweep import load_config
from harness.model.memory import estimate_point, kv_cache_bytes
from harness.model.spec import resolve_model
from tests.conftest import run_benchmark
from workloads.registry import WORKLOADS


def test_kv_cache_uses_the_real_number_of_kv_heads():
    llama70 = resolve_model(ModelConfig(preset="llama-2-70b"))
    # 80 layers x 8 KV heads x 128 dims x (K and V) x 2 bytes = 320 KiB per token, not the 2.5 MiB of 64 heads
    assert kv_cache_bytes(llama70, batch_size=1, tokens=1) == 80 * 8 * 128 * 2 * 2
    tiny = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    assert kv_cache_bytes(tiny, batch_size=4, tokens=100) == 2 * 2 * 2 * 32 * 4 * 100 * 4


def test_estimate_adds_weights_kv_and_activations():
    llama7 = resolve_model(ModelConfig(preset="llama-2-7b", dtype="bf16"))
    e = estimate_point(llama7, batch_size=8, input_length=512, output_length=512)
    assert e.weights_bytes == llama7.num_params * 2
    assert e.kv_cache_bytes == 8 * 1024 * 32 * 32 * 128 * 2 * 2  # MHA: 32 KV heads
    assert 0 < e.activation_bytes < e.kv_cache_bytes
    eager = estimate_point(llama7, 8, 512, 512, eager_attention=True)
    assert eager.activation_bytes - e.activation_bytes == 8 * 32 * 512 * 512 * 4


@pytest.mark.engine
def test_70b_ends_cleanly_in_seconds_with_every_point_skipped(tmp_path):
    start = time.monotonic()
    proc = run_benchmark("yamls/70b.yaml", "--output-dir", tmp_path / "out", "--no-plots", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 60
    rows = read(tmp_path / "out")
    entries = len(load_config("yamls/70b.yaml", [], BACKENDS, WORKLOADS).backends)
    assert len(rows) == entries * 7 * 3 * 3 and {r["status"] for r in rows} == {"skipped"}
    assert all(r["load_time_s"] == "" for r in rows)  # never loaded


@pytest.mark.engine
def test_70b_on_this_cpu_is_stopped_by_the_memory_estimate(tmp_path):
    proc = run_benchmark("yamls/70b.yaml", "--output-dir", tmp_path / "out", "--no-plots",
                         "backends=[{name: hf, device: cpu}]", timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = read(tmp_path / "out")
    assert len(rows) == 7 * 3 * 3
    for r in rows:
        assert r["status"] == "skipped"
        estimate = re.match(r"needs an estimated ([\d.]+) GiB \(weights 128.5, ", r["error"])
        assert estimate and float(estimate.group(1)) >= 128.5, r["error"]
        assert "GiB allowed on cpu" in r["error"]


def read(out):
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.engine
def test_dry_run_shows_the_plan_and_loads_nothing():
    proc = run_benchmark("yamls/70b.yaml", "--dry-run", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"0 of {len(load_config('yamls/70b.yaml', [], BACKENDS, WORKLOADS).backends) * 63} points fit this machine" in proc.stdout
    assert "warning: backend vllm-tp8: needs 8 CUDA device(s), this machine has 0" in proc.stdout


@pytest.mark.engine
@pytest.mark.parametrize("fraction,fits", [(0.9, True), (1e-6, False)])
def test_memory_fraction_moves_the_line(fraction, fits):
    proc = run_benchmark("yamls/cpu-tiny.yaml", "--dry-run", f"memory_fraction={fraction}", timeout=120)
    assert proc.returncode == 0
    fitting = re.search(r"(\d+) of (\d+) points fit this machine", proc.stdout)
    assert (fitting.group(1) == fitting.group(2)) == fits and int(fitting.group(2)) > 0

"""A machine without an engine (a GPU image with its own torch and no vLLM) still sweeps: that engine's entries are
`skipped` with "<module> is not installed", planned and recorded as such, and every other entry runs (here the null
engine, backends/synthetic.py, which needs no engine package)."""

import os

import pytest

from backends import base
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.plan.sweep import plan_sweep
from app.cli import models_of
from tests.conftest import REPO, run_benchmark
from tests.contract import rows
from workloads.registry import WORKLOADS

HIDER = REPO / "tests" / "fixtures" / "hide_modules"
TWO = ["backends=[{name: synthetic}, {name: vllm, device: cpu}]", "batch_sizes=[1]", "input_lengths=[16]",
       "output_lengths=[4]", "num_batches=1"]


def test_an_engine_that_is_not_installed_is_planned_as_skipped(monkeypatch):
    monkeypatch.setattr(base, "installed", lambda module: module != "vllm")
    config = load_config(REPO / "yamls" / "cpu-tiny.yaml", TWO, BACKENDS, WORKLOADS)
    plans = {plan.label: plan for model, workload in models_of(config)
             for plan in plan_sweep(config, model, BACKENDS, workload)}
    assert plans["vllm"].unavailable == "vllm is not installed"
    assert plans["synthetic"].unavailable is None


@pytest.mark.engine
def test_a_sweep_without_vllm_skips_its_entries_and_runs_the_rest(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{HIDER}:{os.environ.get('PYTHONPATH', '')}", "BENCH_HIDE_MODULES": "vllm"}
    proc = run_benchmark("yamls/cpu-tiny.yaml", *TWO, "--output-dir", tmp_path / "out", "--no-plots", env=env,
                         timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning: backend vllm: vllm is not installed; its points will be skipped" in proc.stdout
    found = {r["backend"]: r for r in rows(tmp_path / "out" / "results.csv")}
    assert (found["vllm"]["status"], found["vllm"]["error"]) == ("skipped", "vllm is not installed")
    assert found["synthetic"]["status"] == "ok"
    assert not (tmp_path / "out" / "logs" / "vllm.log").exists()  # no worker was started for it

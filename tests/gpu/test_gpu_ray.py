"""vLLM's Ray executor on one GPU machine: a Ray head started here (`ray start --head`, loopback), a vllm entry with
distributed_executor_backend: ray on it (ray_address), its greedy tokens against the same engine's mp executor (same
random weights: random_weights: harness). The path a multi-node vLLM entry takes (README, "More than one node"),
minus the second machine; vLLM's CPU build refuses Ray, so only here. Ray is stopped whatever happens."""

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from harness.run.process_group import free_port
from tests.conftest import run_benchmark
from tests.contract import MARKER, processes_with, rows
from tests.gpu.smoke import cuda_device_count

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1800)]


def ray_cli() -> list:
    found = shutil.which("ray", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "ray.scripts.scripts"]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    if not cuda_device_count():
        pytest.skip("needs a CUDA device")
    if importlib.util.find_spec("ray") is None:
        pytest.skip("needs the ray package (vLLM's GPU build brings it)")
    port = free_port()
    subprocess.run([*ray_cli(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                    "--include-dashboard=false", "--disable-usage-stats"], check=True, timeout=300)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([*ray_cli(), "stop", "--force"], timeout=300)


def test_the_ray_executor_runs_and_matches_mp_token_for_token(ray_head, tmp_path):
    sweep = tmp_path / "ray.yaml"
    sweep.write_text(f"""benchmark_name: gpu-ray
model: {{preset: llama-1b, weights: random, dtype: bf16}}
backends:
  - {{name: vllm, label: vllm-mp, device: cuda, random_weights: harness, gpu_memory_utilization: 0.5}}
  - {{name: vllm, label: vllm-ray, device: cuda, random_weights: harness, gpu_memory_utilization: 0.5,
     distributed_executor_backend: ray, ray_address: '{ray_head}'}}
batch_sizes: [1, 8]
input_lengths: [128]
output_lengths: [32]
num_batches: 3
""")
    marker = uuid.uuid4().hex
    proc = run_benchmark(sweep, "--output-dir", tmp_path / "out", "--no-plots", env={**os.environ, MARKER: marker},
                         timeout=1500)
    assert proc.returncode == 0, proc.stderr
    by_entry = {(r["backend"], r["batch_size"]): r for r in rows(tmp_path / "out" / "results.csv")}
    for batch in ("1", "8"):
        mp, ray = by_entry[("vllm-mp", batch)], by_entry[("vllm-ray", batch)]
        assert mp["status"] == ray["status"] == "ok", (mp["error"], ray["error"])
        assert float(ray["tokens_identical_share"]) == 1.0
    assert not processes_with(marker)

"""The GPU suite (`make test-gpu`): every CUDA path of the harness, run for real on the machine's GPUs.

Every test here is marked `gpu` and skipped ("needs a CUDA device") where torch sees no CUDA device, so the
CPU suite (`make test`) reports them skipped at once, loading nothing.

One sweep, yamls/gpu-smoke.yaml (hf, accelerate, deepspeed and vllm on llama-1b, bf16, random weights), runs
through `python benchmark.py` once per GPU count: 1, and all of the machine's GPUs when it has more than one
(accelerate's num_devices, deepspeed's and vllm's tp_size set to that count). The module-scoped `sweep` fixture
runs it; the tests only read its results folder, so each engine starts once per GPU count.

Rehearsal without a GPU: `BENCH_GPU_SUITE_ON_CPU=1 python -m pytest tests/gpu` runs the same sweep on the CPU
(tiny-llama in fp32, deepspeed over 2 ranks, vllm eager) and the same checks against its results; the checks
that only mean something on a GPU (CUDA allocator, NVML energy, CUDA graphs, overhead on cuda) still skip.
"""

import os
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_benchmark
from tests.contract import MARKER
from tests.gpu.smoke import (
    NO_CUDA,
    SMOKE_YAML,
    SWEEP_TIMEOUT_S,
    Sweep,
    cuda_device_count,
    gpu_counts,
    rehearsal,
    sweep_args,
)

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Without a CUDA device (and no rehearsal asked for), skip every test of this folder: nothing runs."""
    if cuda_device_count() or rehearsal():
        return
    skip = pytest.mark.skip(reason=NO_CUDA)
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="module", params=gpu_counts(), ids=lambda n: f"{n}gpu")
def sweep(request, tmp_path_factory) -> Sweep:
    """The smoke sweep on `param` GPUs (on the CPU in the rehearsal), run once for all the tests of a module."""
    gpus = request.param
    device = "cuda" if cuda_device_count() else "cpu"
    overrides = sweep_args(device, gpus)
    out = tmp_path_factory.mktemp(f"gpu-smoke-{gpus}gpu") / "out"
    marker = uuid.uuid4().hex  # set in every process the sweep starts: none may outlive it (tests/contract.py)
    proc = run_benchmark(SMOKE_YAML, *overrides, "--output-dir", out, "--no-plots", timeout=SWEEP_TIMEOUT_S,
                         env={**os.environ, MARKER: marker})
    sys.stdout.write(proc.stdout[-5000:])  # the summary, for `pytest -s`
    return Sweep(out, device, gpus, proc, marker)

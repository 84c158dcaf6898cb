import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Two cores: keep torch from oversubscribing when pytest and a child process both run.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def run_benchmark(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """`python benchmark.py ARGS` as a user runs it: a fresh process, real exit code and streams."""
    return subprocess.run([sys.executable, str(REPO / "benchmark.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture
def tiny_yaml(tmp_path) -> Path:
    """A fast tiny-llama sweep: 2 batch sizes x 2 inputs x 2 outputs, fp32 on the CPU."""
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "benchmark_name: tiny\n"
        "model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
        "backends: [{name: hf, device: cpu}]\n"
        "batch_sizes: [1, 4]\n"
        "input_lengths: [16, 64]\n"
        "output_lengths: [1, 8]\n"
        "num_batches: 3\n"
        "num_warmup_batches: 1\n"
    )
    return path

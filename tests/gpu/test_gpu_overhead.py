"""`make overhead` on cuda: the harness's latency over a bare `generate` loop on the GPU, alternated pair by pair in
one process (benchmarks/overhead/hf_batch.py --device cuda: the median of the per-pair ratios, the method of every
overhead figure), within 1.00 +/- 0.02; the device is synchronized around both, as the harness's stamps are."""

import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.gpu.smoke import OVERHEAD_TOLERANCE, cuda_device_count, overhead_figures

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900)]


def test_harness_overhead_on_cuda():
    if not cuda_device_count():  # also in the CPU rehearsal: this check is the GPU's
        pytest.skip("needs a CUDA device")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "overhead" / "hf_batch.py"), "--device", "cuda",
                           "--batch-sizes", "8"], cwd=REPO, capture_output=True, text=True, timeout=840)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(proc.stdout)
    (figure,) = overhead_figures(proc.stdout)
    assert figure.path == "hf batch (cuda)"  # it ran on the GPU
    assert abs(figure.ratio - 1) <= OVERHEAD_TOLERANCE, proc.stdout

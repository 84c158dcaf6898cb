"""`--plan`: the largest batch by the memory estimate per entry and lengths, on this machine or a planned one."""

import pytest

from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.model.hardware import Machine, cuda_device_count, planning_for
from harness.model.spec import resolve_model
from harness.plan.capacity import plan_capacity
from harness.scenarios.batch_search import largest_fitting
from tests.conftest import run_benchmark
from workloads.registry import WORKLOADS, build_workload


@pytest.mark.parametrize("limit_fits,expected", [(0, 0), (1, 1), (7, 7), (64, 64), (1000, 1000), (70000, 1 << 16)])
def test_largest_fitting_finds_the_edge(limit_fits, expected):
    calls = []
    assert largest_fitting(lambda n: calls.append(n) or n <= limit_fits) == expected
    assert len(calls) <= 40  # doubling then bisecting, never a scan


def test_70b_on_8_h100s_without_the_gpus():
    config = load_config("yamls/70b.yaml", ["hardware.gpu=h100-sxm", "hardware.num_gpus=8"], BACKENDS,
                         WORKLOADS)
    model = resolve_model(config.model)
    with planning_for(Machine("h100-sxm", 8)):
        assert cuda_device_count() == 8
        rows = plan_capacity(config, model, BACKENDS, build_workload(config, model))
    assert cuda_device_count() == 0  # back to this machine's
    by_entry = {}
    for row in rows:
        by_entry.setdefault(row.label, []).append(row)
    assert set(by_entry) == {"hf", "vllm-tp8", "vllm-tp2", "deepspeed-tp8", "deepspeed-tp2", "accelerate-8",
                             "accelerate-2"}
    assert all(len(pairs) == 9 for pairs in by_entry.values())  # 3 inputs x 3 outputs
    # 70B in bf16 (128.5 GiB) does not fit one 80 GB GPU; on 8 it leaves room for hundreds of sequences.
    assert all(r.max_batch == 0 and "one sequence needs" in r.reason for r in by_entry["hf"])
    tp8 = {(r.input_length, r.output_length): r for r in by_entry["vllm-tp8"]}
    assert tp8[(128, 64)].max_batch > tp8[(2048, 1000)].max_batch > 64
    assert all(0 < r.max_batch < t.max_batch for r, t in zip(by_entry["vllm-tp2"], by_entry["vllm-tp8"]))
    for r in rows:
        if r.max_batch:  # the estimate at the max batch fits, one more sequence would not
            assert r.estimate.total_bytes <= r.budget_bytes and r.kv_tokens > 0


@pytest.mark.engine
def test_plan_through_benchmark_py():
    proc = run_benchmark("yamls/70b.yaml", "--plan", "hardware.gpu=h100-sxm", "hardware.num_gpus=8")
    assert proc.returncode == 0, proc.stderr
    assert "on 8 x h100-sxm" in proc.stdout and "does not fit" in proc.stdout
    assert "hf: one sequence needs an estimated 128.5 GiB" in proc.stdout.replace("\n", " ")
    dry = run_benchmark("yamls/70b.yaml", "--dry-run", "hardware.gpu=h100-sxm", "hardware.num_gpus=2")
    assert dry.returncode == 0, dry.stderr
    # Planned for 2 GPUs: the tp8 entries lack 6, the tp2 ones run.
    assert "needs 8 CUDA device(s), 2 x h100-sxm has 2" in dry.stdout.replace("\n", " ")
    here = run_benchmark("yamls/cpu-tiny.yaml", "--plan")
    assert here.returncode == 0 and "on this machine" in here.stdout

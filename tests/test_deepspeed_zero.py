"""DeepSpeed ZeRO-Inference on the CPU (docs/measurement.md, "ZeRO-Inference"): ZeRO stage 3 with the weights
offloaded to host memory, one rank and two (each generating half of every batch), the same greedy tokens as `hf`,
load time and device and host memory on every row; offload: nvme where DeepSpeed's async I/O can run; the planner's
view of offloaded weights; and the config checks."""

import json
import os
from pathlib import Path

import pytest

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.model.hardware import Machine, planning_for
from harness.model.spec import resolve_model
from harness.plan.capacity import plan_capacity
from tests.contract import assert_invariants, processes_with, rows, run_marked, write_sweep
from tests.test_deepspeed import ds_shm_segments
from workloads.registry import WORKLOADS, build_workload


def async_io_available() -> bool:
    from deepspeed.ops.op_builder import AsyncIOBuilder

    return AsyncIOBuilder().is_compatible(verbose=False)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zero")
    nvme = tmp / "nvme"
    nvme.mkdir()
    entries = ("{name: hf, device: cpu}, {name: deepspeed_zero, device: cpu, offload: cpu}, "
               "{name: deepspeed_zero, label: zero-2ranks, device: cpu, offload: cpu, num_ranks: 2}, "
               f"{{name: deepspeed_zero, label: zero-nvme, device: cpu, offload: nvme, nvme_path: {nvme}}}")
    yaml = write_sweep(tmp / "zero.yaml", entries, batch_sizes="[2, 3]", input_lengths="[16]",
                       output_lengths="[8]")
    before = ds_shm_segments()
    proc, marker = run_marked(yaml, "--output-dir", tmp / "out")
    return proc, tmp / "out", marker, ds_shm_segments() - before


def by_entry(out: Path) -> dict:
    return {(r["backend"], int(r["batch_size"])): r for r in rows(out / "results.csv")}


@pytest.mark.engine
def test_zero_offload_runs_the_same_model_as_hf_with_its_memory_on_every_row(sweep):
    proc, out, marker, leaked_shm = sweep
    assert proc.returncode in (0, 1), proc.stderr  # 1: the nvme entry's error rows, where async I/O cannot run
    found = by_entry(out)
    hf_weights = int(found[("hf", 2)]["weight_bytes"])
    for label, devices in (("deepspeed_zero", 1), ("zero-2ranks", 2)):
        r = found[(label, 2)]
        assert r["status"] == "ok", r["error"]
        assert (r["num_devices"], r["tp_size"]) == (str(devices), "1")
        assert_invariants(r)
        assert float(r["tokens_identical_share"]) == 1  # harness weights, greedy: hf's tokens exactly
        assert int(r["weight_bytes"]) == hf_weights  # every partition, wherever it lives
        assert float(r["load_time_s"]) > 0
        # On the CPU the device is the host: both readings are the process's peak RSS, weights included.
        assert int(r["peak_host_memory_bytes"]) == int(r["peak_memory_bytes"]) > hf_weights
    assert found[("hf", 2)]["peak_host_memory_bytes"] == ""  # only offloading engines say it
    assert not processes_with(marker)
    assert not leaked_shm


@pytest.mark.engine
def test_ranks_split_the_batch_and_a_batch_they_cannot_split_is_skipped(sweep):
    _, out, _, _ = sweep
    found = by_entry(out)
    assert found[("deepspeed_zero", 3)]["status"] == "ok"
    skipped = found[("zero-2ranks", 3)]
    assert skipped["status"] == "skipped" and skipped["error"] == "batch size 3 does not divide among num_ranks 2"
    manifest = json.loads((out / "manifest.json").read_text())
    runtime = {b["label"]: b["runtime"] for b in manifest["backends"]}
    for label in ("deepspeed_zero", "zero-2ranks"):
        info = runtime[label]
        assert info["offloaded_to"] == "cpu" and info["partitioned_parameters"] > 0
        assert info["zero_optimization"]["stage"] == 3 and info["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert len(runtime["zero-2ranks"]["load_peak_rss_bytes_per_rank"]) == 2


@pytest.mark.engine
def test_nvme_offload_runs_where_async_io_can_and_says_why_where_it_cannot(sweep):
    _, out, _, _ = sweep
    row = by_entry(out)[("zero-nvme", 2)]
    if async_io_available():
        assert row["status"] == "ok", row["error"]
        assert float(row["tokens_identical_share"]) == 1
    else:
        assert row["status"] == "error"
        assert row["error"] == ("loading failed: RuntimeError: offload: nvme needs DeepSpeed's async_io op, which "
                                "needs libaio (e.g. apt-get install libaio-dev): not available on this machine")


def test_offloaded_weights_plan_as_fitting_where_whole_ones_do_not():
    """Llama-3.1-70B on one 80 GB GPU: whole weights do not fit; offloaded to host memory, the GPU holds the layers
    in use, the KV cache and activations, and batches of hundreds fit."""
    config = load_config("yamls/70b-offload.yaml", ["hardware.gpu=h100-sxm", "hardware.num_gpus=2"], BACKENDS,
                         WORKLOADS)
    model = resolve_model(config.model)
    with planning_for(Machine("h100-sxm", 2)):
        found = {r.label: r for r in plan_capacity(config, model, BACKENDS, build_workload(config, model))}
    assert found["hf"].max_batch == 0
    one, two = found["zero-offload-1gpu"], found["zero-offload-2gpu"]
    assert one.max_batch > 100 and two.max_batch >= 2 * one.max_batch - 1
    assert one.estimate.weights_bytes < 6 * 1024**3 < model.weights_bytes  # two layers and the head, not 131 GiB
    assert 0 < found["deepspeed-tp2"].max_batch < one.max_batch


@pytest.mark.parametrize("entry, message", [
    ("{name: deepspeed_zero, offload: nvme}",
     "backends[0].nvme_path: offload: nvme needs a writable folder, e.g. nvme_path: /local_nvme/zero"),
    ("{name: deepspeed_zero, offload: nvme, nvme_path: /dev/null}",
     "backends[0].nvme_path: '/dev/null' is not a writable folder"),
    ("{name: deepspeed_zero, offload: disk}", "backends[0].offload: 'disk' is not one of none, cpu, nvme"),
    ("{name: deepspeed_zero, nvme_path: /tmp}", "backends[0].nvme_path: only read with offload: nvme (offload is cpu)"),
    ("{name: deepspeed_zero, num_ranks: 0}", "backends[0].num_ranks: must be at least 1, got 0"),
    ("{name: deepspeed_zero, zero_optimization: {stage: 2}}",
     "backends[0].zero_optimization.stage: set by backends[0]'s (always 3)"),
])
def test_bad_zero_options_exit_2_with_one_line(tmp_path, capsys, entry, message):
    yaml = write_sweep(tmp_path / "bad.yaml", entry)
    assert main([str(yaml), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_quantization_with_zero_is_skipped_with_the_reason(tmp_path, capsys):
    yaml = write_sweep(tmp_path / "q.yaml", "{name: deepspeed_zero, device: cpu}",
                       model="preset: tiny-llama, dtype: fp32, quantization: [none, int8]")
    assert main([str(yaml), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "quantization int8: deepspeed_zero has no mapping in the harness (it has none here)" in out


def test_the_zero_entry_gets_its_own_environment():
    """LOCAL_SIZE sized to the ranks (DeepSpeed's CPU all-reduce needs it under torchrun) and the CPU accelerator."""
    from backends.generate.deepspeed_zero import ZeroBackend, ZeroOptions

    options = ZeroOptions(name="deepspeed_zero", device="cpu", num_ranks=2)
    env = ZeroBackend.launch_env(options, ZeroBackend.resolve_placement(options))
    assert env["LOCAL_SIZE"] == "2" and env["DS_ACCELERATOR"] == "cpu"
    assert "OMP_NUM_THREADS" in env or "OMP_NUM_THREADS" in os.environ

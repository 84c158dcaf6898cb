"""Accelerate `device_map` backend on the CPU: hooks on every block, the CSV contract, machine fit, bad options."""

import json

import pytest
import torch
from accelerate.utils import convert_file_size_to_int

from backends.generate.accelerate_pp import AccelerateBackend, AccelerateOptions, hooked_blocks
from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.fields import size_bytes
from harness.model.hardware import usable_cpus
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec
from tests.conftest import run_benchmark
from tests.contract import assert_csv_contract, rows, write_sweep

BLOCKS = ["model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm", "model.rotary_emb", "lm_head"]


def load(model, **options):
    backend = AccelerateBackend(AccelerateOptions(name="accelerate", device="cpu", **options), model,
                                SweepShape(4, 64, 16))
    backend.load()
    return backend


def test_every_block_is_dispatched_with_hooks_on_the_cpu(model):
    backend = load(model)
    info = backend.runtime_info()
    assert list(backend.device_map) == BLOCKS and set(backend.device_map.values()) == {"cpu"}
    assert info["layers_per_device"] == {"cpu": 2} and info["num_devices"] == 1
    hooked = hooked_blocks(backend.net)
    assert "" in hooked and set(BLOCKS) <= set(hooked)  # the root (io_same_device) and every mapped block
    assert type(backend.net.model.layers[0]._hf_hook).__name__ == "AlignDevicesHook"
    assert not any(p.is_meta for p in backend.net.parameters())


def test_pretrained_weights_load_through_the_same_map(model, tmp_path):
    folder = tmp_path / "model"
    load(model).net.save_pretrained(folder)
    pretrained = resolve_model(ModelConfig(name_or_path=str(folder), weights="pretrained", dtype="fp32"))
    backend = load(pretrained)
    assert list(backend.device_map) == BLOCKS and "model.layers.1" in hooked_blocks(backend.net)
    random = load(model)
    name = "model.layers.1.mlp.up_proj.weight"
    assert torch.equal(backend.net.get_parameter(name), random.net.get_parameter(name))


def test_what_does_not_fit_max_memory_is_offloaded_to_disk(model, tmp_path):
    backend = load(model, max_memory={"cpu": "20MB"}, offload_folder=str(tmp_path))
    assert "disk" in backend.device_map.values() and any(tmp_path.iterdir())
    reference = load(model)
    batch = BatchSpec([[5] * 16, [7] * 16], (4, 4))
    assert backend.run(batch).token_ids == reference.run(batch).token_ids


@pytest.mark.parametrize("options,message", [
    ({"device": "tpu"}, "backends[0].device: 'tpu' is not one of auto, cpu, cuda"),
    ({"device_map": "spread"}, "backends[0].device_map: 'spread' is not one of auto, balanced, balanced_low_0, "
                               "sequential"),
    ({"num_devices": 0}, "backends[0].num_devices: must be at least 1, got 0"),
    ({"max_memory": {"gpu": "1GiB"}}, "backends[0].max_memory.gpu: not a device; use a GPU index (0, 1, ...), "
                                      "cpu or disk"),
    ({"max_memory": {0: "lots"}}, "backends[0].max_memory.0: expected bytes or a size like 20GiB, got 'lots'"),
    ({"num_devices": 2, "max_memory": {2: "1GiB"}}, "backends[0].max_memory.2: GPU 2 is beyond num_devices (2)"),
])
def test_bad_options_name_the_key(options, message):
    with pytest.raises(UserError) as e:
        AccelerateOptions(name="accelerate", **options).validate("backends[0]")
    assert str(e.value) == message


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("accelerate")
    yaml = write_sweep(tmp / "tiny.yaml", "{name: accelerate, device: cpu, max_memory: {0: 20GiB, cpu: 4GiB}}, "
                       "{name: accelerate, label: acc-64, device: cpu, num_devices: 64}")
    out = tmp / "out"
    return yaml, run_benchmark(yaml, "--output-dir", out, "--no-plots"), out


@pytest.mark.engine
def test_end_to_end_csv_contract(sweep):
    _, proc, out = sweep
    assert proc.returncode == 0, proc.stderr
    assert_csv_contract(out, "accelerate", points=8, num_batches=2, num_devices=1, tp_size=1)
    manifest = json.loads((out / "manifest.json").read_text())
    runtime = manifest["backends"][0]["runtime"]
    assert runtime["device_map"] == dict.fromkeys(BLOCKS, "cpu") and runtime["layers_per_device"] == {"cpu": 2}
    assert runtime["architecture"] == manifest["model"]["architecture"]


@pytest.mark.engine
def test_an_entry_needing_more_devices_is_skipped_with_both_numbers(sweep):
    yaml, proc, out = sweep
    skipped = [r for r in rows(out / "results.csv") if r["backend"] == "acc-64"]
    assert len(skipped) == 8 and {r["status"] for r in skipped} == {"skipped"}
    assert {r["error"] for r in skipped} == {f"needs 64 CPU cores, this machine has {usable_cpus()}"}
    assert {r["num_devices"] for r in skipped} == {"64"}
    assert "warning: backend acc-64: needs 64" in proc.stdout.replace("\n", " ")
    dry = run_benchmark(yaml, "--dry-run", timeout=120)
    assert dry.returncode == 0 and "needs 64" in dry.stdout


@pytest.mark.parametrize("size", [5, "20GiB", "1.5GB", "8Gb", "100MB", "3MiB", "2KiB", "7kb", "0GB", "1e3MB"])
def test_sizes_read_as_accelerate_reads_them(size):
    assert size_bytes(size) == convert_file_size_to_int(size)


@pytest.mark.parametrize("size", ["abc", "GB", "-1GB", -3, "12", True, 1.5])
def test_what_is_not_a_size_is_refused(size):
    with pytest.raises(ValueError):
        size_bytes(size)

"""The manifest's hardware facts, read without importing torch where no GPU can be present: a stream or server sweep's
own process then imports no torch at all (docs/measurement.md, "Where a sweep's time goes")."""

import json
import subprocess
import sys
import types

import pytest

from harness.measure import manifest
from tests.conftest import REPO


def test_a_machine_without_gpu_device_files_is_described_without_importing_torch():
    code = ("import json, sys; from harness.measure.manifest import hardware_info, hardware_label; "
            "info = hardware_info(); label = hardware_label('cpu'); "
            "print(json.dumps([info, label, 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    info, label, imported = json.loads(out.stdout)
    if manifest.gpus_possible():
        pytest.skip("this machine has a GPU driver's device files: torch is asked, as it should be")
    assert not imported
    import torch

    assert info["gpus"] == [] and info["cuda"] == torch.version.cuda  # what torch itself says
    assert label.endswith(f"({info['cpus_usable']} cores)")


def fake_torch(tmp_path, version_py: str):
    package = tmp_path / "torch"
    package.mkdir()
    (package / "version.py").write_text(version_py)
    return types.SimpleNamespace(submodule_search_locations=[str(package)])


@pytest.mark.parametrize("version_py, cuda", [
    ("from typing import Optional\n__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\nhip = None\n", "13.0"),
    ("__version__ = '2.13.0+cpu'\ncuda = None\n", None),
])
def test_the_cuda_version_is_read_from_torchs_version_file(tmp_path, monkeypatch, version_py, cuda):
    monkeypatch.setattr(manifest.importlib.util, "find_spec", lambda name: fake_torch(tmp_path, version_py))
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch would raise: the file alone must answer
    assert manifest.torch_cuda_version() == cuda


@pytest.mark.parametrize("version_py", ["cuda = some_call()\n", "cuda = (\n", "cuda = 13\n", "hip = None\n"])
def test_a_version_file_that_does_not_say_asks_torch_itself(tmp_path, monkeypatch, version_py):
    monkeypatch.setattr(manifest.importlib.util, "find_spec", lambda name: fake_torch(tmp_path, version_py))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(version=types.SimpleNamespace(cuda="12.8")))
    assert manifest.torch_cuda_version() == "12.8"


def test_no_torch_installed_is_no_cuda(monkeypatch):
    monkeypatch.setattr(manifest.importlib.util, "find_spec", lambda name: None)
    assert manifest.torch_cuda_version() is None


def test_gpu_device_files_send_the_question_to_torch(monkeypatch):
    monkeypatch.setattr(manifest, "GPU_DEVICE_FILES", (str(REPO / "benchmark.py"),))  # a file that exists
    cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 1,
                                 get_device_name=lambda i: "NVIDIA H200",
                                 get_device_properties=lambda i: types.SimpleNamespace(total_memory=150_000_000_000))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert manifest.gpu_info() == [{"name": "NVIDIA H200", "memory_bytes": 150_000_000_000}]
    assert manifest.hardware_label("cuda") == "NVIDIA H200"

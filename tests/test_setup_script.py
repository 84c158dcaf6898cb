"""scripts/setup-venv.sh (what `make setup` runs) refuses a Python outside vLLM 0.32's range in one line, before it
builds anything."""

import subprocess

import pytest

from tests.conftest import REPO

FAKE_PYTHON = """#!/bin/sh
# A stand-in interpreter: reports its version, fails any program (as the range check on an old Python does).
if [ "$1" = "--version" ]; then echo "Python 3.10.13"; exit 0; fi
exit 1
"""


def setup(tmp_path, python: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/setup-venv.sh", str(tmp_path / "venv")], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHON": python})


@pytest.mark.engine
@pytest.mark.parametrize("interpreter,found", [("fake", "Python 3.10.13"), ("no-such-python3", "not found")])
def test_an_unsupported_python_is_refused_in_one_line(tmp_path, interpreter, found):
    if interpreter == "fake":
        fake = tmp_path / "python3.10"
        fake.write_text(FAKE_PYTHON)
        fake.chmod(0o755)
        interpreter = str(fake)
    proc = setup(tmp_path, interpreter)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: Python 3.11 to 3.14 needed (vLLM 0.32's range); {interpreter}: {found}. Set " \
                          "PYTHON, e.g. PYTHON=python3.12.\n"
    assert not (tmp_path / "venv").exists()


def no_torch_python(tmp_path) -> str:
    """This interpreter without its site-packages: a supported Python that has no torch."""
    import sys

    wrapper = tmp_path / "python3-bare"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def setup_with(tmp_path, python: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/setup-venv.sh", str(tmp_path / "venv")], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHON": python, **env})


@pytest.mark.engine
@pytest.mark.parametrize("env,message", [
    ({"SETUP_TORCH": "conda"}, "error: SETUP_TORCH: 'conda' is not one of pinned (the default), system"),
    ({"SETUP_TORCH": "system"}, "error: SETUP_TORCH=system: {python} has no torch to use; leave SETUP_TORCH unset to "
                                "install one"),
    ({"WHEELHOUSE": "/no/such/wheelhouse"}, "error: WHEELHOUSE: no such folder '/no/such/wheelhouse' (make one with "
                                            "scripts/wheelhouse.py make DIR)"),
])
def test_bad_install_settings_are_refused_in_one_line(tmp_path, env, message):
    python = no_torch_python(tmp_path)
    proc = setup_with(tmp_path, python, **env)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == message.format(python=python) + "\n"
    assert not (tmp_path / "venv").exists()

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

"""A finished worker or sweep exits without the interpreter's teardown (harness/run/exit_now.py), and loses nothing a
normal exit would have done: its threads finish, its atexit handlers run, its buffered output is written."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent("""
    import atexit, ctypes, sys, tempfile, threading, time
    from pathlib import Path
    from harness.run.exit_now import exit_now

    folder = tempfile.TemporaryDirectory()  # removed by its finalizer, which runs at exit
    Path(sys.argv[1]).write_text(folder.name)
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread finished", end=";"))).start()
    atexit.register(print, "atexit ran", end=";")
    ctypes.CDLL(None).printf(b"printed by C;")  # held in the C library's buffer: stdout is a pipe
    print("buffered", end=";")
    exit_now(None if sys.argv[2] == "None" else int(sys.argv[2]))
""")


@pytest.mark.parametrize("code, status", [("0", 0), ("None", 0), ("3", 3)])
def test_exit_now_keeps_what_a_normal_exit_does(tmp_path, code, status):
    named = tmp_path / "folder"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as a worker's log
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(named), code], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == status, proc.stderr
    assert set(proc.stdout.split(";")) == {"buffered", "thread finished", "atexit ran", "printed by C", ""}
    assert proc.stdout.index("thread finished") < proc.stdout.index("atexit ran")  # threads end first, as at exit
    assert not Path(named.read_text()).exists()

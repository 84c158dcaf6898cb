"""A server process the harness starts for a backend (`openai`'s `command`) and always stops: its whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import List

from harness.worker import die_with_parent

STOP_GRACE_S = 20.0
LOG_TAIL_LINES = 5


def start_server(argv: List[str], log_path: Path) -> subprocess.Popen:
    """Start a server command as the leader of its own process group (so that `stop_group` ends all of it),
    its output into `log_path`, and SIGTERMed by the kernel when the thread that started it dies
    (PR_SET_PDEATHSIG fires when the forking *thread* exits: start it from one that lives as long as the
    backend, as the worker's main thread does)."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=die_with_parent)


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` is still running (zombies, already dead, do not count)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces or parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the server's whole process group (it leads it: start_new_session), wait up to `grace_s` for
    every member to end, then SIGKILL whatever is left. Reaps the leader."""
    pgid = proc.pid

    def signal_group(sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        proc.poll()
        if not group_alive(pgid):
            break
        if time.monotonic() > deadline:
            signal_group(signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            break
        time.sleep(0.05)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last non-empty lines of a log, joined into one line."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    tail = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail)[-1500:]


def exit_wording(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"

"""Ending a process group, every member of it: a worker with its engine processes and ranks, a server.

Waiting for the leader is not enough. An engine's children (vLLM's engine core and its executor workers) may still
be shutting down when the leader has exited, and they free what the kernel does not free for them, such as the
/dev/shm segments of their message queues; a SIGKILL sent then leaves those behind for good, and /dev/shm is RAM.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import List, Optional, Protocol

POLL_S = 0.05


class GroupLeader(Protocol):
    """What ending a group needs of its leader: a `subprocess.Popen`, or a worker forked from a preloading process
    (harness/run/preload.py, PreloadedWorker)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> Optional[int]: ...

    def poll(self) -> Optional[int]: ...

    def wait(self, timeout: Optional[float] = None) -> int: ...


def _stat(pid) -> Optional[List[str]]:
    """/proc/PID/stat's fields after the command name (state, ppid, pgrp, ...); None for a process that is gone.
    The name may hold spaces or parentheses, so it is split after the last ')'."""
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie has)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` is still running (zombies, already dead, do not count)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(entry.name)
        if fields is not None and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def wait_group(proc: GroupLeader, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for every member of `proc`'s group (it leads it) to end; reaps the leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc.poll()
        if not group_alive(proc.pid):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)


def end_group(proc: GroupLeader, exit_s: float, term_s: float, kill_s: float = 5.0) -> None:
    """Give the group `exit_s` to end by itself, then SIGTERM it and give it `term_s`, then SIGKILL what is left."""
    if wait_group(proc, exit_s):
        return
    for sig, wait_s in ((signal.SIGTERM, term_s), (signal.SIGKILL, kill_s)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if wait_group(proc, wait_s):
            return
    try:
        proc.wait(timeout=kill_s)
    except subprocess.TimeoutExpired:
        pass


def describe_exit(code: Optional[int]) -> str:
    """`SIGSEGV` for a process a signal ended, `exit code 3` for one that exited."""
    if code is not None and code < 0:
        return signal.Signals(-code).name
    return f"exit code {code}"


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies, so no worker outlives a killed sweep."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on now (its user binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

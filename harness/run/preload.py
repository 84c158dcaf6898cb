"""Workers forked from a process that has already imported what they import (issue 49; docs/measurement.md, "Where
a sweep's time goes").

A new worker interpreter spends seconds importing torch and transformers, or vLLM, before it can load anything (3.5 s
for an hf entry and 5 to 7 s for a vLLM one on this project's 2-core machine), paid entry after entry. Instead the
sweep starts one preloading process with the entries' environment; for each entry it imports what that entry's
worker imports before its load is timed (the worker's own modules, the backend's, the engine's, and transformers'
model base where the worker reads the model's config) and what unpickling its job imports (a model config the sweep
built is a transformers object, whatever the engine), those not imported yet, then forks the worker. A forked
worker is what `python -m harness.run.worker JOB SOCKET` would be after those imports: a session (process group) of
its own, the entry's log as its stdout and stderr, the same environment and working directory. Nothing is built
before the fork (no engine, no thread pool, no device), and the load timer starts after the imports either way, so
what is timed is the same. Its exit status is relayed to the sweep, which supervises it as it does any worker.

The preloading process dies with the sweep, and a worker with it (PR_SET_PDEATHSIG); between entries it waits
blocked on its connection, using no CPU beside a timed point. There is one per environment the sweep's entries
run in (an engine's `launch_env` differs from another's), each kept until the sweep ends.
"""

from __future__ import annotations

import importlib
import os
import pickletools
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from harness.run.exit_now import exit_now
from harness.run.process_group import GroupLeader, die_with_parent, running

REPO = Path(__file__).resolve().parents[2]
WORKER_MODULE = "harness.run.worker"


def worker_modules(backend_cls) -> Tuple[str, ...]:
    """What a worker of `backend_cls` imports before its load is timed: its own modules, the backend's and
    `Backend.worker_imports` (harness/run/runner.py, EntryRunner._load)."""
    return (WORKER_MODULE, backend_cls.__module__, *backend_cls.worker_imports())


class PreloadedWorker:
    """A forked worker as the sweep sees it: `subprocess.Popen`'s `pid`, `poll`, `wait` and `returncode`. Until the
    preloading process has forked it (it may still be importing), `pid` is that process's: stopping the worker then
    stops the import."""

    def __init__(self, preloader: "Preloader", ticket: int):
        self.preloader, self.ticket = preloader, ticket
        self.child: Optional[int] = None
        self.returncode: Optional[int] = None

    @property
    def pid(self) -> int:
        self.poll()
        return self.child if self.child is not None else self.preloader.proc.pid

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.preloader.pump(0)
        if self.returncode is None and self.preloader.said_all and self.preloader.proc.poll() is not None:
            # It ended without saying this worker ended: it died importing (no worker), or while the worker ran,
            # which then dies with it. Its own end is the reason.
            if self.child is None or not running(self.child):
                self.returncode = self.preloader.proc.returncode
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"preloaded worker {self.ticket}", timeout or 0)
            self.preloader.pump(0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic())))
        assert self.returncode is not None
        return self.returncode


class Preloader:
    """One preloading process (`python -m harness.run.preload FD`), the environment it was started with, and the
    workers it forked."""

    def __init__(self, env: Dict[str, str], log_path: Path):
        self.env = env
        ours, theirs = socket.socketpair()
        with open(log_path, "ab") as log:  # until its first entry's imports, which go to that entry's log
            self.proc = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())], cwd=REPO, env=env,
                                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                                         pass_fds=[theirs.fileno()])
        theirs.close()
        self.conn = Connection(ours.detach())
        self.workers: Dict[int, PreloadedWorker] = {}
        self.imported: set = set()  # what it has been asked to import so far
        self.said_all = False  # its connection has ended, every message read

    def start(self, modules: Sequence[str], job_path: str, socket_path: str, log_path: Path) -> PreloadedWorker:
        ticket = len(self.workers) + 1
        worker = self.workers[ticket] = PreloadedWorker(self, ticket)
        self.imported.update(modules)
        try:
            self.conn.send((ticket, tuple(modules), job_path, socket_path, str(log_path)))
        except OSError:  # it is gone: the worker's poll says how it ended
            pass
        return worker

    def pump(self, timeout_s: float) -> None:
        """Read what it said: a worker forked (its pid), a worker ended (its exit status)."""
        try:
            while self.conn.poll(timeout_s):
                kind, ticket, value = self.conn.recv()
                if kind == "started":
                    self.workers[ticket].child = value
                else:
                    self.workers[ticket].returncode = value
                timeout_s = 0
        except (EOFError, OSError):  # it ended; PreloadedWorker.poll says what that means for each worker
            self.said_all = True

    def close(self) -> None:
        self.conn.close()  # it exits when its connection closes
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WorkerStarter:
    """Starts the sweep's workers: forked from the preloading process started with the entry's environment where
    the entry allows it, else as a new interpreter (`command`). One preloading process per environment the sweep's
    entries run in (hf's, vLLM's), kept until the sweep ends: entries of a grid or of a quantization list take
    turns between engines."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.preloaders: Dict[Tuple[Tuple[str, str], ...], Preloader] = {}

    def start(self, command: List[str], preloadable: bool, env: Dict[str, str], modules: Sequence[str],
              job_path: str, socket_path: str, log_path: Path) -> Tuple[GroupLeader, str]:
        """The worker's process (a `subprocess.Popen` or a `PreloadedWorker`) and how it was started, in words."""
        if not (self.enabled and preloadable):
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log, env=env, start_new_session=True)
            return proc, "new interpreter"
        # and what unpickling its job imports: a model config the sweep built is a transformers object, whatever
        # the engine. The manifest names their packages, less the harness's own, the standard library and those
        # of the worker's modules.
        job = [m for m in pickled_modules(job_path) if m not in modules]
        named = {m.split(".")[0] for m in modules} | QUIET
        said = [*modules, *dict.fromkeys(m.split(".")[0] for m in job if m.split(".")[0] not in named)]
        modules = [*modules, *job]
        key = tuple(sorted(env.items()))
        preloader = self.preloaders.get(key)
        if preloader is None or preloader.proc.poll() is not None:  # none yet, or it died: its workers with it
            preloader = self.preloaders[key] = Preloader(env, log_path)
        new = [m for m in said if m not in preloader.imported]
        how = "forked from a preloading process" + (f" that imported {', '.join(new)} for it" if new else "")
        worker = preloader.start(modules, job_path, socket_path, log_path)
        preloader.imported.update(said)  # the packages named: a later entry's job is said to need none of them
        return worker, how

    def close(self) -> None:
        """At the sweep's end, every worker ended."""
        for preloader in self.preloaders.values():
            preloader.close()
        self.preloaders = {}


# --- the preloading process --------------------------------------------------------------------------------------

def serve(conn: Connection) -> int:
    """For each request, import its modules and fork its worker, until the sweep closes the connection."""
    die_with_parent()
    from harness.run.worker import quiet_import_noise

    quiet_import_noise()
    children: Dict[int, int] = {}  # pid: ticket
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a worker's end wakes the select below
    try:
        while True:
            ready, _, _ = select.select([conn.fileno(), wake_r], [], [])  # blocked: no CPU beside a timed point
            if wake_r in ready:
                os.read(wake_r, 512)
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    conn.send(("exited", children.pop(pid), os.waitstatus_to_exitcode(status)))
            if conn.fileno() in ready:
                ticket, modules, job_path, socket_path, log_path = conn.recv()
                _output_to(log_path)  # what the imports print is the entry's, as a new worker's would be
                for name in modules:
                    try:
                        importlib.import_module(name)
                    except Exception:  # noqa: BLE001 - the worker imports it again and reports why it fails
                        pass
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _worker(conn, (wake_r, wake_w), job_path, socket_path)
                children[pid] = ticket
                conn.send(("started", ticket, pid))
    except (EOFError, OSError):
        return 0  # the sweep is over (or gone); a worker still running dies with this process


QUIET = {"harness", "backends", "workloads", "app", "plots", *sys.stdlib_module_names}

# Opcodes that push a string, fetch one from the memo, store the top of the stack in it, or leave the stack alone.
STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}
GETS, PUTS, NEUTRAL = {"BINGET", "LONG_BINGET", "GET"}, {"BINPUT", "LONG_BINPUT", "PUT"}, {"FRAME", "PROTO"}


def pickled_modules(path: str) -> List[str]:
    """The modules a pickle's classes and functions come from (its GLOBAL and STACK_GLOBAL opcodes), read without
    unpickling it: what loading it will import. STACK_GLOBAL takes its module and name from the two strings pushed
    before it, each written out or fetched from the memo."""
    modules: List[str] = []
    pushed: List[Optional[str]] = []  # what each opcode pushed: a string, or None for anything else
    memo: Dict[int, Optional[str]] = {}
    with open(path, "rb") as f:
        for op, arg, _ in pickletools.genops(f):
            if op.name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif op.name in PUTS:
                memo[int(str(arg))] = pushed[-1] if pushed else None
            elif op.name in NEUTRAL:
                pass
            elif op.name in STRINGS:
                pushed.append(str(arg))
            elif op.name in GETS:
                pushed.append(memo.get(int(str(arg))))
            else:
                module = str(arg).split(" ")[0] if op.name == "GLOBAL" else None
                if op.name == "STACK_GLOBAL" and len(pushed) >= 2:
                    module = pushed[-2]
                if module and module not in modules:
                    modules.append(module)
                pushed.append(None)
    return modules


def _output_to(log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _worker(conn: Connection, wake: Tuple[int, int], job_path: str, socket_path: str) -> None:
    """The forked child, from here on a worker as `python -m harness.run.worker` would be; never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (conn.fileno(), *wake):
            os.close(fd)
        sys.argv = [WORKER_MODULE, job_path, socket_path]
        from harness.run.worker import main

        code = main(job_path, socket_path)
    except BaseException:  # noqa: B036 - whatever it was, the entry's log says it and the exit status is 1
        traceback.print_exc()
    exit_now(code)


if __name__ == "__main__":
    exit_now(serve(Connection(int(sys.argv[1]))))

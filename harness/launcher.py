"""Run one backend entry in its own process (or its ranks) and turn whatever happens there into rows.

Isolation is the point: vLLM's engine and an HF model never share a process or GPU memory,
and a segfault, a hang or a killed rank costs `error` rows for that entry, not the sweep.
The parent owns the CSV; the worker only sends records back (harness/worker.py).
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable, Dict, List, Optional

from harness.manifest import engine_environment
from harness.process_group import end_group
from harness.records import PointResult, point_key
from harness.sweep import EntryPlan, PlannedPoint
from harness.worker import WorkerJob

REPO = Path(__file__).resolve().parent.parent
POLL_S = 0.5
WORKER_EXIT_S = 60.0  # a finished worker closing its engine (vLLM's shutdown takes seconds)
CHILDREN_EXIT_S = 10.0  # then what the worker left ending (engine processes, multiprocessing's resource tracker)


@dataclass
class Supervision:
    """What the parent knows about a running worker: which point is in flight, which are reported."""

    todo: List[PlannedPoint]
    reported: set = field(default_factory=set)
    in_flight: Optional[PlannedPoint] = None
    loading: bool = False
    done: bool = False
    info: Dict[str, object] = field(default_factory=dict)
    failure: Optional[str] = None  # why the worker stopped early: "died (SIGSEGV)", "timed out ..."
    stamps: Dict[str, float] = field(default_factory=dict)  # time.monotonic() of spawned, connected, loading, ...
    phase_s: Dict[str, float] = field(default_factory=dict)  # warm-up and timed seconds, summed over points

    def stamp(self, event: str) -> None:
        self.stamps.setdefault(event, time.monotonic())

    def time_budget(self) -> Dict[str, float]:
        """Where the entry's wall time went (docs/measurement.md, "Where a sweep's time goes"): worker start up to
        its connecting, engine import (unpickling the job imports the backend's module, then its engine's),
        model load, warm-up and timed work, shutdown from the last point's result (closing the engine, the
        process exiting), and the rest (per-point bookkeeping, memory readings, gaps)."""
        s = self.stamps
        total = s["exited"] - s["spawned"]
        parts = {"worker_start_s": s.get("connected", s["exited"]) - s["spawned"]}
        if "loading" in s:
            parts["engine_import_s"] = s["loading"] - s["connected"] + float(self.info.get("engine_import_s", 0.0))
        if "load_time_s" in self.info:
            parts["load_s"] = float(self.info["load_time_s"])
        parts.update(warmup_s=self.phase_s.get("warmup_s", 0.0), timed_s=self.phase_s.get("timed_s", 0.0))
        if "done" in s:  # from the last point: closing the engine happens before the worker says it is done
            parts["shutdown_s"] = s["exited"] - s.get("last_result", s["done"])
        return {"total_s": total, **parts, "other_s": total - sum(parts.values())}


def launch_command(plan: EntryPlan, job_path: Path, socket_path: Path) -> List[str]:
    """One Python process, or `tp_size` ranks under torchrun for distributed engines."""
    worker = ["-m", "harness.worker", str(job_path), str(socket_path)]
    if not plan.backend_cls.distributed:
        return [sys.executable, *worker]
    ranks = plan.placement.tp_size
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
            "--master-port", str(free_port()), *worker]


def run_in_worker(job: WorkerJob, emit: Callable[[PointResult], None], log_path: Path,
                  load_timeout_s: float, point_timeout_s: float) -> Dict[str, object]:
    """Run the entry's points in a worker; every todo point is reported exactly once. Returns runtime info."""
    key = job.context.backend
    state = Supervision([pp for pp in job.plan.points if point_key(key, pp.point) not in job.done])
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        socket_path, job_path = Path(tmp) / "worker.sock", Path(tmp) / "job.pkl"
        job_path.write_bytes(pickle.dumps(job))
        listener = _listen(str(socket_path))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        state.stamp("spawned")
        with open(log_path, "ab") as log:
            env = _worker_env(job.plan)
            proc = subprocess.Popen(launch_command(job.plan, job_path, socket_path), cwd=REPO, stdout=log, stderr=log,
                                    env=env, start_new_session=True)
        try:
            conn = _accept(listener, proc, state, load_timeout_s)
            if conn is not None:
                _supervise(conn, proc, state, emit, load_timeout_s, point_timeout_s)
        finally:
            listener.close()
            # A worker that finished, or died by itself, gets time to exit (torchrun then writes which rank
            # failed, and how); a hung one is killed at once.
            _stop(proc, graceful=state.failure is None)
            state.stamp("exited")
    _report_unfinished(job, state, emit, _exit_reason(proc, state, log_path), log_path)
    return {**state.info, "environment": engine_environment(env), "time_budget_s": state.time_budget()}


def _worker_env(plan: EntryPlan) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(plan.backend_cls.launch_env(plan.options, plan.placement))
    return env


def _listen(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)
    sock.settimeout(POLL_S)
    return sock


def _accept(listener: socket.socket, proc: subprocess.Popen, state: Supervision,
            timeout_s: float) -> Optional[Connection]:
    """Wait for rank 0 to connect: imports and engine start-up count against the load timeout."""
    deadline = time.monotonic() + timeout_s
    state.loading = True
    while proc.poll() is None:
        if time.monotonic() > deadline:
            state.failure = f"timed out after {timeout_s:.0f} s (load_timeout_s) before reporting"
            return None
        try:
            sock, _ = listener.accept()
        except socket.timeout:
            continue
        sock.setblocking(True)
        state.stamp("connected")
        return Connection(sock.detach())
    return None


def _supervise(conn: Connection, proc: subprocess.Popen, state: Supervision, emit, load_timeout_s: float,
               point_timeout_s: float) -> None:
    last_event = time.monotonic()
    while not state.done:
        limit = load_timeout_s if state.loading else point_timeout_s
        if conn.poll(POLL_S):
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                return
            _handle(kind, payload, state, emit)
            last_event = time.monotonic()
        elif proc.poll() is not None and not conn.poll(0):
            return
        elif time.monotonic() - last_event > limit:
            name = "load_timeout_s" if state.loading else "point_timeout_s"
            state.failure = f"timed out after {limit:.0f} s ({name})"
            return


def _handle(kind: str, payload, state: Supervision, emit) -> None:
    state.stamp(kind)
    if kind == "loading":
        state.loading = True
    elif kind == "loaded":
        state.loading, state.info = False, payload
    elif kind == "started":
        state.in_flight = next(pp for pp in state.todo if pp.point == payload)
    elif kind == "result":
        if state.in_flight is not None and state.in_flight.point == payload.point:
            state.in_flight = None  # a search's probes come before its own result: the search is still in flight
        state.reported.add(payload.point)
        state.stamps["last_result"] = time.monotonic()
        for phase, seconds in payload.phase_s.items():
            state.phase_s[phase] = state.phase_s.get(phase, 0.0) + seconds
        emit(payload)
    elif kind == "done":
        state.done = True


def _stop(proc: subprocess.Popen, graceful: bool) -> None:
    """End the worker's whole process group (engine children, ranks): a finished worker, and the engine processes
    it leaves shutting down, get time to exit; a hung one is stopped at once."""
    if graceful:
        try:
            proc.wait(timeout=WORKER_EXIT_S)
        except subprocess.TimeoutExpired:
            pass
    end_group(proc, exit_s=CHILDREN_EXIT_S if graceful else 0.0, term_s=10.0)


def _exit_reason(proc: subprocess.Popen, state: Supervision, log_path: Path) -> str:
    if state.failure:
        return state.failure
    rank = _failed_rank(log_path)
    if rank:
        return f"died (rank {rank[0]}: {_describe_exit(rank[1])})"
    return f"died ({_describe_exit(proc.returncode)})"


def _describe_exit(code: Optional[int]) -> str:
    if code is not None and code < 0:
        return signal.Signals(-code).name
    return f"exit code {code}"


def _failed_rank(log_path: Path) -> Optional[tuple]:
    """torchrun's failure summary, its "Root Cause" block ("rank : 1 ..." then "exitcode : -11"): which rank, how.

    The other ranks show up there too, killed by torchrun with SIGTERM; the root cause is the one that matters.
    """
    try:
        tail = log_path.read_text(errors="replace")[-20000:]
    except OSError:
        return None
    tail = tail[tail.rfind("Root Cause"):] if "Root Cause" in tail else tail
    found = re.findall(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", tail)
    return (int(found[0][0]), int(found[0][1])) if found else None


def _report_unfinished(job: WorkerJob, state: Supervision, emit, reason: str, log_path: Path) -> None:
    if state.done:
        return
    log = f"{log_path.parent.name}/{log_path.name}"  # relative to the results folder holding the row
    for pp in state.todo:
        if pp.point in state.reported:
            continue
        if pp is state.in_flight:
            message = f"worker {reason} during this point (log: {log})"
        elif state.loading and not state.reported:
            message = f"worker {reason} while loading the model (log: {log})"
        else:
            message = f"not run: the {job.context.backend} worker {reason} earlier (log: {log})"
        # A search's row, even a failed one, keeps the probes it already reported on --resume (ResultsDir.open).
        search = "result" if pp.point.batch_search or pp.point.rate_search else ""
        emit(PointResult(job.context, pp.point, "error", message, estimated_memory_bytes=pp.estimate.total_bytes,
                         search=search))


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on now (its user binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

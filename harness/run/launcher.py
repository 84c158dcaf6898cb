"""Run one backend entry in its own process (or its ranks) and turn whatever happens there into rows.

Isolation is the point: vLLM's engine and an HF model never share a process or GPU memory,
and a segfault, a hang or a killed rank costs `error` rows for that entry, not the sweep.
The parent owns the CSV; the worker only sends records back (harness/run/worker.py).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from harness.measure.gpu_validity import SWEEP_PID_ENV
from harness.measure.manifest import engine_environment
from harness.measure.records import PointResult
from harness.plan.entry import EntryPlan
from harness.plan.points import PlannedPoint
from harness.run.cluster import NodeControl, NodeEntry, first_failure, loopback_env, spans_nodes, torchrun_command
from harness.run.preload import WORKER_MODULE, WorkerStarter, worker_modules
from harness.run.process_group import GroupLeader, end_group, free_port
from harness.run.wait_notices import WaitNotices
from harness.run.worker import WorkerJob

REPO = Path(__file__).resolve().parents[2]
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
    info: Dict[str, Any] = field(default_factory=dict)  # the worker's "loaded" message: load time, runtime facts
    failure: Optional[str] = None  # why the worker stopped early: "died (SIGSEGV)", "timed out ..."
    stamps: Dict[str, float] = field(default_factory=dict)  # time.monotonic() of spawned, connected, loading, ...
    phase_s: Dict[str, float] = field(default_factory=dict)  # warm-up and timed seconds, summed over points

    @property
    def all_reported(self) -> bool:
        return all(pp.point in self.reported for pp in self.todo)

    def stamp(self, event: str, at: Optional[float] = None) -> None:
        self.stamps.setdefault(event, time.monotonic() if at is None else at)

    def count_phases(self, result: PointResult) -> None:
        """Add a finished point's warm-up and timed seconds to the entry's totals."""
        for phase, seconds in result.phase_s.items():
            self.phase_s[phase] = self.phase_s.get(phase, 0.0) + seconds

    def time_budget(self) -> Dict[str, float]:
        """Where the entry's wall time went (docs/measurement.md, "Where a sweep's time goes"): worker start up to
        its connecting, engine import (unpickling the job imports the backend's module, then its engine's),
        waiting for the previous entry's engine to end, model load, warm-up and timed work, shutdown from the last
        point's result (closing the engine, the process group ending), and the rest (per-point bookkeeping, memory
        readings, gaps). `overlap_s`, not a part: how long its start ran beside the previous entry's shutdown."""
        s = self.stamps
        total = s["exited"] - s["spawned"]
        parts = {"worker_start_s": s.get("connected", s["exited"]) - s["spawned"]}
        if "loading" in s:
            parts["engine_import_s"] = s["loading"] - s["connected"] + float(self.info.get("engine_import_s", 0.0))
        if "gate_wait_s" in self.info:
            parts["waiting_s"] = float(self.info["gate_wait_s"])
        if "load_time_s" in self.info:
            parts["load_s"] = float(self.info["load_time_s"])
        parts.update(warmup_s=self.phase_s.get("warmup_s", 0.0), timed_s=self.phase_s.get("timed_s", 0.0))
        if "done" in s:  # from the last point: closing the engine happens before the worker says it is done
            parts["shutdown_s"] = s["exited"] - s.get("last_result", s["done"])
        overlap_s = max(0.0, s.get("gate_open", s["spawned"]) - s["spawned"])
        return {"total_s": total, **parts, "other_s": total - sum(parts.values()), "overlap_s": overlap_s}


def launch_command(plan: EntryPlan, job_path: Path, socket_path: Path,
                   node: Optional["NodeEntry"] = None) -> List[str]:
    """One Python process, or the placement's ranks under torchrun for distributed engines: this node's share of
    them, joining the other nodes' at node 0's rendezvous, for an entry on more than one node."""
    worker = ["-m", WORKER_MODULE, str(job_path), str(socket_path)]
    if not plan.backend_cls.distributed:
        return [sys.executable, *worker]
    p = plan.placement
    if node is not None:
        return torchrun_command(p.nodes, p.ranks_per_node, node.control.endpoint, node.entry,
                                node.control.cluster.join_timeout_s, str(job_path), str(socket_path))
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(p.num_ranks),
            "--master-port", str(free_port()), *worker]


class WorkerRun:
    """One entry's worker, from its spawn to the end of its whole process group.

    Entries overlap at one place only. Once a worker has reported its last point, `run` returns and the worker
    closes its engine (seconds for vLLM) while the next entry's worker starts and imports its engine; that one
    loads only after this one's group has ended (`end`), through a gate file, so no two engines ever hold memory
    at once and nothing measured overlaps anything.
    """

    def __init__(self, job: WorkerJob, emit: Callable[[PointResult], None], log_path: Path, load_timeout_s: float,
                 point_timeout_s: float, notices: Optional[WaitNotices] = None, control: Optional[NodeControl] = None,
                 starter: Optional[WorkerStarter] = None):
        self.emit, self.log_path = emit, log_path
        self.notices = notices or WaitNotices(job.plan.label, lambda text: None)
        self.load_timeout_s, self.point_timeout_s = load_timeout_s, point_timeout_s
        self.state = Supervision([pp for pp in job.plan.points
                                  if job.context.key(pp.point) not in job.done])
        self.runtime: Dict[str, object] = {}  # the manifest's entry runtime, completed by `end`
        self.conn: Optional[Connection] = None
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-")
        tmp = Path(self._tmp.name)
        self.gate = tmp / "load.gate"
        self.job = dataclasses.replace(job, load_gate=str(self.gate))
        job_path, socket_path = tmp / "job.pkl", tmp / "worker.sock"
        job_path.write_bytes(pickle.dumps(self.job))
        self.listener = _listen(str(socket_path))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.state.stamp("spawned")
        self.env = _worker_env(job.plan)
        self.node = NodeEntry(control, control.reserve()) if spans_nodes(job.plan) and control else None
        self.env.update(loopback_env(job.plan, control) if self.node else {})
        plan = job.plan
        # A fork of a preloaded process (harness/run/preload.py) for a worker of one process on this machine's CPU;
        # torchrun starts distributed entries' ranks, and no fork is made where a GPU is used.
        preloadable = not plan.backend_cls.distributed and self.node is None and plan.placement.device != "cuda"
        self.proc, self.runtime["worker_start"] = (starter or WorkerStarter(enabled=False)).start(
            launch_command(plan, job_path, socket_path, self.node), preloadable, self.env,
            worker_modules(plan.backend_cls), str(job_path), str(socket_path), log_path)
        self._ended = False

    def run(self, previous: Optional["WorkerRun"] = None) -> bool:
        """Wait for `previous` to end, let this worker load, and supervise it until every point is reported or it
        fails. True: it is closing its engine by itself, and `end` waits for that; False: `end` stops it."""
        state = self.state
        if previous is not None:
            previous.end()
        state.stamp("gate_open")
        self.gate.touch()
        if self.node is not None:
            self.notices.begin("the other nodes' agents")
            state.failure = self._post_to_other_nodes()
            if state.failure:
                return False
        self.notices.begin("its worker to start")
        self.conn = _accept(self.listener, self.proc, state, self.load_timeout_s, self.notices)
        self.listener.close()
        if self.conn is not None:
            self.notices.begin("its engine to import and load")
            _supervise(self.conn, self.proc, state, self.emit, self.load_timeout_s, self.point_timeout_s,
                       self.notices, until_reported=True)
        self.notices.end()
        return self.conn is not None and state.failure is None and state.all_reported

    def _post_to_other_nodes(self) -> Optional[str]:
        assert self.node is not None  # called only for an entry that spans nodes
        p, plan = self.job.plan.placement, self.job.plan
        backend_env = {**plan.backend_cls.launch_env(plan.options, p), **loopback_env(plan, self.node.control)}
        why = self.node.control.post(self.node.entry, plan.label, p.nodes, p.ranks_per_node, backend_env,
                                     pickle.dumps(self.job))
        self.node.posted = why is None
        return why

    def end(self, abandon: bool = False) -> Dict[str, object]:
        """Let a finished worker close its engine and exit (torchrun then writes which rank failed, and how), stop
        a failed or hung one at once, end its whole group, report what it never did; the entry's runtime.
        `abandon` (Ctrl-C): stop it at once and report nothing more, so that --resume runs what it did not."""
        if self._ended:
            return self.runtime
        self._ended = True
        state = self.state
        if abandon:
            state.failure = state.failure or "abandoned"
        try:
            if self.conn is not None and state.failure is None and not state.done:
                self.notices.begin("its engine to close")
                _supervise(self.conn, self.proc, state, self.emit, self.load_timeout_s, WORKER_EXIT_S, self.notices)
                self.notices.end()
        finally:
            self.listener.close()
            _stop(self.proc, graceful=state.failure is None)
            nodes = self.node.other_nodes(self.job.plan.placement.nodes, state.failure is not None or
                                          self.proc.returncode != 0) if self.node else {}
            state.stamp("exited")
            self._tmp.cleanup()
        if not abandon:
            _report_unfinished(self.job, state, self.emit, _exit_reason(self.proc, state, self.log_path, nodes),
                               self.log_path)
        self.runtime.update(state.info, environment=engine_environment(self.env), time_budget_s=state.time_budget())
        return self.runtime


def _worker_env(plan: EntryPlan) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(plan.backend_cls.launch_env(plan.options, plan.placement))
    env[SWEEP_PID_ENV] = str(os.getpid())  # this process and the worker's are the sweep's on its GPUs
    return env


def _listen(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)
    sock.settimeout(POLL_S)
    return sock


def _accept(listener: socket.socket, proc: GroupLeader, state: Supervision, timeout_s: float,
            notices: WaitNotices) -> Optional[Connection]:
    """Wait for rank 0 to connect: imports and engine start-up count against the load timeout. A worker that
    connected and then died while the previous entry was ending is still accepted: its last words are queued."""
    deadline = time.monotonic() + timeout_s
    state.loading = True
    while True:
        try:
            sock, _ = listener.accept()
        except socket.timeout:
            notices.tick()
            if proc.poll() is not None:
                return None
            if time.monotonic() > deadline:
                state.failure = f"timed out after {timeout_s:.0f} s (load_timeout_s) before reporting"
                return None
            continue
        sock.setblocking(True)
        return Connection(sock.detach())


def _supervise(conn: Connection, proc: GroupLeader, state: Supervision, emit, load_timeout_s: float,
               point_timeout_s: float, notices: WaitNotices, until_reported: bool = False) -> None:
    """Handle the worker's events until it is done (or, `until_reported`, has reported every point), dies, or is
    silent for longer than the phase it is in allows (state.failure says which)."""
    last_event = time.monotonic()
    while not state.done and not (until_reported and state.all_reported):
        limit = load_timeout_s if state.loading else point_timeout_s
        notices.tick()
        if conn.poll(POLL_S):
            try:
                kind, payload, at = conn.recv()
            except (EOFError, OSError):
                return
            _handle(kind, payload, at, state, emit)
            last_event = time.monotonic()
            if kind == "loading":  # the engine is imported; a server may be coming up
                notices.begin("its engine to load")
            elif kind in ("loaded", "started"):  # a point's time is the progress line's to show, not a wait
                notices.end()
        elif proc.poll() is not None and not conn.poll(0):
            return
        elif time.monotonic() - last_event > limit:
            name = "load_timeout_s" if state.loading else "point_timeout_s"
            state.failure = f"timed out after {limit:.0f} s ({name})"
            return


def _handle(kind: str, payload, at: float, state: Supervision, emit) -> None:
    """One event of the worker, `at` its time.monotonic() when it happened there."""
    state.stamp(kind, at)
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
        state.stamps["last_result"] = at
        state.count_phases(payload)
        emit(payload)
    elif kind == "done":
        state.done = True


def _stop(proc: GroupLeader, graceful: bool) -> None:
    """End the worker's whole process group (engine children, ranks): a finished worker, and the engine processes
    it leaves shutting down, get time to exit; a hung one is stopped at once."""
    if graceful:
        try:
            proc.wait(timeout=WORKER_EXIT_S)
        except subprocess.TimeoutExpired:
            pass
    end_group(proc, exit_s=CHILDREN_EXIT_S if graceful else 0.0, term_s=10.0)


def _exit_reason(proc: GroupLeader, state: Supervision, log_path: Path, other_nodes: Dict[int, dict]) -> str:
    """Why the worker stopped early: node 0's own reason, or which rank died how (and on which node)."""
    return state.failure or f"died ({first_failure(proc.returncode, log_path, other_nodes)})"


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

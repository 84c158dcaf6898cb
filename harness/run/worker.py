"""The worker process of one backend entry: `python -m harness.run.worker JOB.pkl SOCKET` (or each rank under torchrun).

It loads the model once, runs the entry's points with the same `EntryRunner` as in-process
runs, and reports every event to the parent over a Unix socket. Only node 0's first local rank reports (a c10d
rendezvous may number another node's ranks first); the other ranks run the same batches (same seeded inputs) so
collective ops line up. Another node's ranks get SOCKET `-` (harness/run/node_agent.py).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Client
from typing import Optional, Set

from harness.config.sweep import SweepConfig
from harness.measure.records import PointResult, RunContext
from harness.model.spec import ModelSpec
from harness.plan.entry import EntryPlan
from harness.plan.points import SweepPoint
from harness.run.exit_now import exit_now
from harness.run.process_group import die_with_parent
from harness.run.runner import EntryRunner, RunEvents

GATE_POLL_S = 0.02
FAULT_ENV = "BENCH_INJECT_FAULT"  # tests only: "KIND@LABEL/RANK/WHEN", WHEN a batch size, "load" or "close";
# KIND segv | hang | exit | slow (SLOW_FAULT_S seconds)
SLOW_FAULT_S = 8.0
OTHER_NODE = "-"  # the SOCKET of ranks on a node other than node 0: they report nothing


@dataclass
class WorkerJob:
    """Everything a worker needs, pickled by the parent: the plan decides, the worker only executes."""

    plan: EntryPlan
    model: ModelSpec
    config: SweepConfig
    context: RunContext
    done: Set[tuple]
    load_gate: Optional[str] = None  # a file whose existence lets the engine load (harness/run/launcher.py, WorkerRun)


class ChannelEvents(RunEvents):
    """Forwards runner events to the parent as ("kind", payload) tuples."""

    def __init__(self, conn, label: str, rank: int, load_gate: Optional[str] = None):
        super().__init__(emit=lambda result: None)
        self.conn, self.label, self.rank, self.load_gate = conn, label, rank, load_gate

    def _send(self, kind: str, payload=None, at: Optional[float] = None) -> None:
        """With the worker's own clock reading: CLOCK_MONOTONIC is one clock for every process of the machine, and
        the parent may read the event much later (it accepts a worker only once the previous entry has ended)."""
        if self.conn is not None:
            self.conn.send((kind, payload, time.monotonic() if at is None else at))

    def may_load(self) -> float:
        """Every rank waits, so that none allocates its shard beside the previous entry's engine."""
        start = time.monotonic()
        while self.load_gate is not None and not os.path.exists(self.load_gate):
            time.sleep(GATE_POLL_S)
        return time.monotonic() - start

    def loading(self) -> None:
        self._send("loading")
        inject_fault(self.label, self.rank, "load")

    def loaded(self, info: dict) -> None:
        self._send("loaded", info)

    def started(self, point: SweepPoint) -> None:
        self._send("started", point)
        inject_fault(self.label, self.rank, point.batch_size)

    def finished(self, result: PointResult) -> None:
        self._send("result", result)

    def closing(self) -> None:
        inject_fault(self.label, self.rank, "close")


def inject_fault(label: str, rank: int, when) -> None:
    """Crash or hang on purpose where BENCH_INJECT_FAULT says, so tests can exercise the failure paths."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    kind, _, where = spec.partition("@")
    if where != f"{label}/{rank}/{when}":
        return
    if kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hang":
        time.sleep(10**6)
    elif kind == "exit":
        os._exit(3)
    elif kind == "slow":  # a slow engine shutdown
        time.sleep(SLOW_FAULT_S)


# torchao (which transformers imports wherever it is installed) logs at import that its CUDA-only extensions did not
# load, and torch warns about the pytree constants it registers: noise on every process's stderr, a one-line error's
# included. Nothing here uses those extensions.
# torchao and pytree warn at import; a tokenizer warns of a prompt longer than the model takes, which the workload then
# refuses (or drops, by max_prompt_tokens) in its own words.
NOISY_LOGGERS = ("torchao", "torch.utils._pytree", "transformers.tokenization_utils_base")


def quiet_import_noise() -> None:
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def main(job_path: str, socket_path: str) -> int:
    quiet_import_noise()
    die_with_parent()
    rank = int(os.environ.get("RANK", "0"))
    node_zero = socket_path != OTHER_NODE
    # Connect before unpickling the job: that imports the engine's module (transformers, vLLM), seconds the
    # parent should count as loading, not as a worker that never started.
    reports = node_zero and os.environ.get("LOCAL_RANK", "0") == "0"
    conn: Optional[object] = Client(socket_path, family="AF_UNIX") if reports else None
    connected = time.monotonic()
    with open(job_path, "rb") as f:
        job: WorkerJob = pickle.load(f)
    # Another node's agent starts its ranks only once node 0's previous entry has ended (the gate is node 0's).
    events = ChannelEvents(conn, job.context.backend, rank, job.load_gate if node_zero else None)
    events._send("connected", at=connected)
    EntryRunner(job.plan, job.model, job.config, job.context, events).run(job.done)
    end_process_group()
    events._send("done")
    return 0


def end_process_group() -> None:
    """Ranks end their process group before exiting: left to the interpreter's exit, gloo's threads were seen torn
    down while still joinable (a rank on another node ended with SIGABRT, "terminate called without an active
    exception", after its last point)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    exit_now(main(sys.argv[1], sys.argv[2]))  # everything it owns is closed by now (harness/run/exit_now.py)

"""Entries across machines: node 0's end of the rendezvous (docs/measurement.md, "More than one node").

This machine (node 0) plans the sweep, writes every row and hosts one torch.distributed TCPStore at
`cluster.rendezvous`. Every other node runs an agent (`benchmark.py --node-agent HOST:PORT`, harness/run/node_agent.py)
that joins that store and waits there for its next entry. For an entry with `nodes` above 1, node 0 posts the entry
(the worker job and how to start its ranks) to the store; each agent it needs starts one torchrun agent, and so does
node 0, all of them joining one c10d rendezvous on the same store (`--rdzv-id` per entry). Only node 0's first local
rank reports (harness/run/worker.py); each agent posts how its ranks ended, and stops them when node 0 says the entry
failed, so nothing is left running on any node.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from harness.config.cluster import ClusterConfig, require_rendezvous
from harness.errors import UserError
from harness.model.hardware import usable_cpus
from harness.run.process_group import describe_exit, end_group

REPO = Path(__file__).resolve().parents[2]
POLL_S = 0.5
EXIT_REPORT_S = 30.0  # how long node 0 waits for the other nodes to say how an entry's ranks ended
ABORTED_REPORT_S = 20.0  # and then, once told to stop them, for a node that had not
# Each agent adds to its `beat/K` counter every HEARTBEAT_S while it runs (harness/run/node_agent.py): one whose
# counter has not moved for SILENT_S is dead (the node or its agent), and node 0 stops waiting for its report.
HEARTBEAT_S = 1.0
SILENT_S = 5.0
STORE_CALL_S = 60.0  # one store call's timeout (waits for a key use their own)


def store_timeout(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def torchrun_command(nodes: int, ranks_per_node: int, endpoint: str, entry: int, join_timeout_s: float,
                     job_path: str, socket_path: str) -> List[str]:
    """One node's torchrun agent for an entry: every node's joins the c10d rendezvous on node 0's store (none hosts
    its own: `is_host=false`), entry `entry`'s round of it."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes), "--nproc-per-node",
            str(ranks_per_node), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", f"entry{entry}",
            "--rdzv-conf", f"is_host=false,join_timeout={int(join_timeout_s)}", "--max-restarts", "0",
            "-m", "harness.run.worker", job_path, socket_path]


class NodeControl:
    """Node 0's side: the store, the entries posted to it, and (node_agents: local) the agents it started here."""

    def __init__(self, cluster: ClusterConfig, log_dir: Path):
        from torch.distributed import TCPStore

        self.cluster = cluster
        host, port = cluster.endpoint
        self.endpoint = f"{host}:{port}"
        try:
            self.store = TCPStore(host, port, is_master=True, wait_for_workers=False, multi_tenant=True,
                                  timeout=store_timeout(STORE_CALL_S))
        except RuntimeError as e:
            raise UserError(f"cluster.rendezvous: cannot host the store at {self.endpoint}: "
                            f"{str(e).splitlines()[0]}") from None
        self.entries = 0
        self.unposted: set = set()
        self.local_agents: List[subprocess.Popen] = []
        if cluster.node_agents == "local":
            log_dir.mkdir(parents=True, exist_ok=True)
            self.local_agents = [start_local_agent(self.endpoint, k, log_dir) for k in range(1, cluster.nodes)]

    def reserve(self) -> int:
        """The next entry's number, before its torchrun agent here starts (its rendezvous id)."""
        self.entries += 1
        self.unposted.add(self.entries - 1)
        return self.entries - 1

    def post(self, entry: int, label: str, nodes: int, ranks_per_node: int, env: Dict[str, str],
             job: bytes) -> Optional[str]:
        """Post `entry` to nodes 1..nodes-1 once their agents have joined; None, or why it cannot start."""
        self.unposted.discard(entry)
        missing = self._wait_agents(nodes)
        if missing:
            self.store.set(f"cmd/{entry}", json.dumps({"kind": "skip"}))
            return missing
        # torch.distributed.Store.set takes bytes as well as str; its stub says str only.
        self.store.set(f"job/{entry}", job)  # type: ignore[arg-type]
        self.store.set(f"cmd/{entry}", json.dumps({"kind": "run", "label": label, "nodes": nodes,
                                                   "ranks_per_node": ranks_per_node, "env": env,
                                                   "join_timeout_s": self.cluster.join_timeout_s}))
        return None

    def _wait_agents(self, nodes: int) -> Optional[str]:
        keys = [f"agent/{k}" for k in range(1, nodes)]
        try:
            self.store.wait(keys, store_timeout(self.cluster.join_timeout_s))
        except RuntimeError:
            absent = [k for k in range(1, nodes) if not self.store.check([f"agent/{k}"])]
            return (f"node {absent[0]}'s agent did not join the rendezvous at {self.endpoint} within "
                    f"{self.cluster.join_timeout_s:.0f} s (cluster.join_timeout_s); on that node run: python "
                    f"benchmark.py --node-agent {self.endpoint} --node-rank {absent[0]}")
        return None

    def abort(self, entry: int) -> None:
        """Tell every agent running `entry` to stop its ranks now (node 0's failed or hung)."""
        self.store.set(f"abort/{entry}", "1")

    def outcomes(self, entry: int, nodes: int, wait_s: float = EXIT_REPORT_S) -> Dict[int, dict]:
        """How each other node's ranks of `entry` ended, as its agent reported ({} for an agent that has not):
        waited for up to `wait_s`, but not for an agent whose heartbeat has stopped."""
        now = time.monotonic()
        deadline = now + wait_s
        found: Dict[int, dict] = {}
        beats = {k: (self.store.add(f"beat/{k}", 0), now) for k in range(1, nodes)}  # count, when it last moved
        while True:
            now = time.monotonic()
            for k in range(1, nodes):
                key = f"exit/{entry}/{k}"
                if k not in found and self.store.check([key]):
                    found[k] = json.loads(self.store.get(key))
                count = self.store.add(f"beat/{k}", 0)
                if count != beats[k][0]:
                    beats[k] = (count, now)
            silent = {k for k, (_, moved) in beats.items() if now - moved > SILENT_S}
            if len(found.keys() | silent) == nodes - 1 or now > deadline:
                return found
            time.sleep(POLL_S)

    def close(self) -> None:
        """Tell every agent the sweep is over, and end the ones started here."""
        for entry in self.unposted:  # reserved, then interrupted before its turn
            self.store.set(f"cmd/{entry}", json.dumps({"kind": "skip"}))
        self.store.set(f"cmd/{self.entries}", json.dumps({"kind": "stop"}))
        for agent in self.local_agents:
            end_group(agent, exit_s=EXIT_REPORT_S, term_s=10.0)


@dataclass
class NodeEntry:
    """An entry on more than one node, as node 0 runs it: its number at the rendezvous, and whether the other nodes
    have it."""

    control: NodeControl
    entry: int
    posted: bool = False

    def other_nodes(self, nodes: int, failed: bool) -> Dict[int, dict]:
        """Once node 0's ranks have ended: stop the other nodes' where node 0's failed, or where they do not end by
        themselves; how each node's ranks ended, as its agent reported."""
        if not self.posted:
            return {}
        if failed:  # their ranks cannot go on without node 0's
            self.control.abort(self.entry)
        found = self.control.outcomes(self.entry, nodes, ABORTED_REPORT_S if failed else EXIT_REPORT_S)
        if len(found) < nodes - 1 and not failed:
            self.control.abort(self.entry)
            found = self.control.outcomes(self.entry, nodes, ABORTED_REPORT_S)
        return {k: found.get(k, {"host": "", "returncode": None, "aborted": False, "silent": True})
                for k in range(1, nodes)}


def first_failure(returncode: Optional[int], log_path: Path, other_nodes: Dict[int, dict]) -> str:
    """Which rank died how: `rank 1: SIGSEGV`, or on more than one node `node 1 (host), rank 1: SIGSEGV`. When one
    rank dies the others' collectives fail after it, so a rank killed by a signal is named first, then a node whose
    agent never reported (the machine or its agent died), then a rank that exited with an error; node 0's before
    another's."""
    silent = [k for k, o in sorted(other_nodes.items()) if o.get("silent")]
    failures = [(0, "", failed_rank(log_path) or [None, returncode])]
    failures += [(k, f" ({o['host']})", o.get("failed_rank") or [None, o["returncode"]])
                 for k, o in sorted(other_nodes.items()) if o["returncode"] and not o["aborted"]]
    failures = [f for f in failures if f[2][1]]
    signalled = [f for f in failures if f[2][1] < 0]
    if not signalled and silent:
        return f"node {silent[0]}: its agent never said how its ranks ended (the node or its agent died)"
    if not failures:
        return describe_exit(returncode)
    k, host, (rank, code) = min(failures, key=lambda f: (f[2][1] >= 0, f[0]))
    where = f"node {k}{host}, " if other_nodes or k else ""
    return f"{where}rank {rank}: {describe_exit(code)}" if rank is not None else f"{where}{describe_exit(code)}"


def open_control(cluster: ClusterConfig, plans: list, log_dir: Path) -> Optional[NodeControl]:
    """Node 0's store, where some entry to run starts ranks on more than one node (torchrun; vLLM's Ray executor
    places its own); else None."""
    if not any(spans_nodes(plan) and any(pp.skip_reason is None for pp in plan.points) for plan in plans):
        return None
    require_rendezvous(cluster)
    return NodeControl(cluster, log_dir)


def spans_nodes(plan) -> bool:
    """Whether the harness starts this entry's ranks on other nodes too (its agents do)."""
    return plan.backend_cls.distributed and plan.placement.nodes > 1


def loopback_env(plan, control: Optional[NodeControl]) -> Dict[str, str]:
    """Nodes on loopback share this machine's cores: a CPU rank gets its share of all of them, not of a node's (each
    node's torchrun would otherwise give every rank of its node all the cores, and the ranks would fight for them)."""
    if control is None or control.cluster.node_agents != "local" or plan.placement.device != "cpu" \
            or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, usable_cpus() // plan.placement.num_ranks))}


def start_local_agent(endpoint: str, node_rank: int, log_dir: Path) -> subprocess.Popen:
    """A node on loopback: this machine runs node `node_rank`'s agent too, in its own process group, its ranks'
    output in `log_dir` beside node 0's."""
    command = [sys.executable, str(REPO / "benchmark.py"), "--node-agent", endpoint, "--node-rank", str(node_rank),
               "--log-dir", str(log_dir)]
    with open(log_dir / f"node{node_rank}-agent.log", "ab") as log:
        return subprocess.Popen(command, cwd=REPO, start_new_session=True, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log)


def failed_rank(log_path: Path) -> Optional[list]:
    """torchrun's failure summary, its "Root Cause" block ("rank : 1 ..." then "exitcode : -11"): [rank, exit code].

    The other ranks show up there too, killed by torchrun with SIGTERM; the root cause is the one that matters.
    """
    try:
        tail = log_path.read_text(errors="replace")[-20000:]
    except OSError:
        return None
    tail = tail[tail.rfind("Root Cause"):] if "Root Cause" in tail else tail
    found = re.findall(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", tail)
    return [int(found[0][0]), int(found[0][1])] if found else None


def this_host() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()

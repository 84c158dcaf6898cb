"""A node other than node 0: `python benchmark.py --node-agent HOST:PORT [--node-rank K]` (harness/run/cluster.py).

It joins node 0's store and runs, entry after entry, what node 0 posts there: for each entry that spans this node, one
torchrun agent whose ranks join the entry's c10d rendezvous; it waits for them to end (all of them: their process
group) before taking the next entry, so no two entries' engines share this node. It reports how the ranks ended, stops
them when node 0 says the entry failed, and exits when node 0 says the sweep is over or is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from harness.errors import UserError
from harness.measure.writers import safe_file_name
from harness.run.cluster import (HEARTBEAT_S, POLL_S, REPO, STORE_CALL_S, failed_rank, store_timeout, this_host,
                                 torchrun_command)
from harness.run.process_group import die_with_parent, end_group
from harness.run.worker import OTHER_NODE

NODE_RANK_VARS = ("SLURM_NODEID", "NODE_RANK", "GROUP_RANK")  # Slurm's srun, the MosaicML platform, torchrun
USER_LOG_LEVEL = os.environ.get("TORCH_CPP_LOG_LEVEL")
WAIT_CMD_S = 5.0  # one wait for node 0's next entry: then check that node 0 is still there and wait again


def node_rank_from_env() -> Optional[int]:
    for name in NODE_RANK_VARS:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def run_agent(endpoint: str, node_rank: Optional[int], join_timeout_s: float, log_dir: Optional[Path]) -> int:
    """The agent's loop; 0 when node 0 said the sweep is over, 1 when node 0 went away first."""
    rank = node_rank if node_rank is not None else node_rank_from_env()
    if rank is None or rank < 1:
        raise UserError(f"--node-rank: node 0 runs the sweep itself; an agent needs its node rank, 1 or more "
                        f"(or {', '.join(NODE_RANK_VARS)} set), got {rank}")
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--node-agent: {endpoint!r} is not HOST:PORT (node 0's cluster.rendezvous)")
    # c10d logs every store wait that times out (one every WAIT_CMD_S) and every connection retry: noise in the
    # agent's output and around its one-line errors. Read when torch loads; its ranks get the user's own level back.
    os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    from torch.distributed import DistNetworkError, DistStoreError, TCPStore

    die_with_parent()
    # srun and the platform stop a job with SIGTERM: end this node's ranks (run_entry's finally) before exiting.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        store = TCPStore(host.strip("[]"), int(port), is_master=False, timeout=store_timeout(join_timeout_s))
    except DistNetworkError:
        raise UserError(f"--node-agent: no rendezvous at {endpoint} within {join_timeout_s:.0f} s (is node 0's "
                        "sweep running, with cluster.rendezvous set to it?)") from None
    store.set_timeout(store_timeout(STORE_CALL_S))
    store.set(f"agent/{rank}", this_host())
    threading.Thread(target=_heartbeat, args=(host.strip("[]"), int(port), rank), daemon=True).start()
    print(f"node {rank} ({this_host()}): joined {endpoint}", flush=True)
    entry = 0
    while True:
        try:
            store.wait([f"cmd/{entry}"], store_timeout(WAIT_CMD_S))
        except DistStoreError:
            continue  # not posted yet: node 0 is running an entry of its own, or planning
        except DistNetworkError:
            print(f"node {rank}: node 0's store at {endpoint} is gone; stopping", flush=True)
            return 1
        command = json.loads(store.get(f"cmd/{entry}"))
        if command["kind"] == "stop":
            print(f"node {rank}: the sweep is over", flush=True)
            return 0
        if command["kind"] == "run" and rank < command["nodes"]:
            outcome = run_entry(store, endpoint, entry, rank, command, log_dir)
            store.set(f"exit/{entry}/{rank}", json.dumps(outcome))
        entry += 1


def _heartbeat(host: str, port: int, rank: int) -> None:
    """Add to `beat/RANK` every HEARTBEAT_S, over a connection of its own, for as long as this agent runs: node 0
    takes an agent whose count stops as dead without waiting out its report (harness/run/cluster.py)."""
    from torch.distributed import TCPStore

    try:
        store = TCPStore(host, port, is_master=False, timeout=store_timeout(STORE_CALL_S))
        while True:
            store.add(f"beat/{rank}", 1)
            time.sleep(HEARTBEAT_S)
    except RuntimeError:  # node 0's store is gone: the agent's own loop sees it too, and stops
        return


def run_entry(store, endpoint: str, entry: int, rank: int, command: dict, log_dir: Optional[Path]) -> dict:
    """This node's ranks of one entry, until they end or node 0 aborts the entry; how they ended."""
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        job_path = Path(tmp) / "job.pkl"
        job_path.write_bytes(store.get(f"job/{entry}"))
        argv = torchrun_command(command["nodes"], command["ranks_per_node"], endpoint, entry,
                                command["join_timeout_s"], str(job_path), OTHER_NODE)
        env = {**os.environ, **command["env"],
               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        env.pop("TORCH_CPP_LOG_LEVEL")
        if USER_LOG_LEVEL is not None:
            env["TORCH_CPP_LOG_LEVEL"] = USER_LOG_LEVEL
        name = safe_file_name(str(command.get("label", "")), f"entry{entry}")
        log_path = Path(log_dir or tmp) / f"{name}.node{rank}.log"
        aborted = True  # until its ranks end by themselves: an agent stopped meanwhile stops them at once
        with open(log_path, "ab") as log:
            # Its ranks end with the agent even when it is killed outright (torchrun then stops them).
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True,
                                    preexec_fn=die_with_parent)
            try:
                aborted = _wait(store, proc, entry)
            finally:
                end_group(proc, exit_s=0.0 if aborted else 10.0, term_s=10.0)
        outcome = {"host": this_host(), "returncode": proc.returncode, "aborted": aborted,
                   "failed_rank": failed_rank(log_path)}
        if log_dir is None:  # the scheduler's output holds this node's log
            sys.stdout.write(log_path.read_text(errors="replace"))
    return outcome


def _wait(store, proc: subprocess.Popen, entry: int) -> bool:
    """Until this node's torchrun agent exits (False) or node 0 aborts the entry (True)."""
    while proc.poll() is None:
        try:
            if store.check([f"abort/{entry}"]):
                return True
        except RuntimeError:  # node 0 is gone: nothing will report these ranks' work
            return True
        time.sleep(POLL_S)
    return False

"""The `cluster` section: the machines a sweep runs on when an entry spans more than one (docs/measurement.md, "More
than one node"). This machine is node 0: it plans, runs every single-node entry, writes the results, and hosts the
rendezvous that the other nodes' agents (`benchmark.py --node-agent HOST:PORT`) and each entry's torchrun agents
join."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from harness.errors import UserError
from harness.fields import WEEK_S, is_int, opt

NODE_AGENTS = ("external", "local")
LOOPBACK_RENDEZVOUS = "127.0.0.1:29400"


@dataclass
class ClusterConfig:
    nodes: int = opt(1, help="Machines the sweep has, this one (node 0) included; an entry's `nodes` may use up to "
                     "this many. --slurm and --mcli set it from their templates.")
    rendezvous: Optional[str] = opt(
        None, help="HOST:PORT on this machine that the other nodes reach: node 0 hosts the store there that their "
        "agents and every entry's torchrun rendezvous (c10d) join. Default with node_agents: local: "
        f"{LOOPBACK_RENDEZVOUS}.")
    node_agents: str = opt("external", help="external: each other node runs `benchmark.py --node-agent HOST:PORT` "
                           "(srun and mcli templates start them) | local: the harness starts them on this machine, "
                           "each a node on loopback (a trial of the multi-node path on one machine).")
    join_timeout_s: float = opt(
        300, gt=0, le=WEEK_S, unit="seconds", help="How long an entry waits for every node's agent and torchrun to "
                                                   "join the "
                                "rendezvous before its points become error rows.")

    @property
    def endpoint(self) -> Tuple[str, int]:
        """(host, port) of the rendezvous; `validate_cluster` has checked its form."""
        text = self.rendezvous or LOOPBACK_RENDEZVOUS
        host, _, port = text.rpartition(":")
        return host.strip("[]"), int(port)


def validate_cluster(cluster: ClusterConfig, entries: List[Any], keys: List[str]) -> None:
    """The section's values, and every entry's `nodes` against what the cluster has (`keys`: each entry's YAML key)."""
    if not is_int(cluster.nodes) or cluster.nodes < 1:
        raise UserError(f"cluster.nodes: must be an integer of at least 1, got {cluster.nodes!r}")
    if cluster.node_agents not in NODE_AGENTS:
        raise UserError(f"cluster.node_agents: {cluster.node_agents!r} is not one of {', '.join(NODE_AGENTS)}")
    if cluster.rendezvous is not None:
        _check_endpoint(cluster.rendezvous)
    for entry, key in zip(entries, keys):
        nodes = getattr(entry, "nodes", 1)
        if nodes > cluster.nodes:
            raise UserError(f"{key}.nodes: {nodes}, but cluster.nodes is {cluster.nodes} (the machines this sweep "
                            "has; set cluster.nodes, or run it through a --slurm or --mcli template with that many)")


def job_cluster(plain: Dict[str, Any], nodes: int, where: str) -> Dict[str, Any]:
    """The `cluster` section of a scheduler's job (`plain`: the resolved sweep, `to_plain`'s): the job's nodes, their
    agents started by the job's command, which also passes node 0's address (only the running job knows it). Every
    entry must fit in the job's nodes; `where` names the template."""
    for i, entry in enumerate(plain.get("backends") or []):
        if int(entry.get("nodes") or 1) > nodes:
            raise UserError(f"{where}: {nodes} node(s), but backends[{i}] ({entry.get('label') or entry['name']}) "
                            f"runs on {entry['nodes']}: the job must hold every node an entry runs on")
    return {**(plain.get("cluster") or {}), "nodes": nodes, "node_agents": "external", "rendezvous": None}


def require_rendezvous(cluster: ClusterConfig) -> None:
    """Before node 0 runs an entry on other nodes (planning needs no address): their agents must know where to go."""
    if cluster.rendezvous is None and cluster.node_agents == "external":
        raise UserError("cluster.rendezvous: required to run entries on more than one node with node_agents: "
                        "external, e.g. rendezvous: node001:29400 (this machine as the other nodes reach it)")


def _check_endpoint(text: str) -> None:
    host, _, port = str(text).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"cluster.rendezvous: {text!r} is not HOST:PORT (e.g. node001:29400 or 127.0.0.1:29400)")


def check_entry_nodes(nodes: Any, key: str, ranks: Optional[int] = None, ranks_key: str = "") -> None:
    """An entry's `nodes`, and its ranks split evenly over them (each node runs the same number)."""
    if not is_int(nodes) or nodes < 1:
        raise UserError(f"{key}.nodes: must be an integer of at least 1, got {nodes!r}")
    if ranks is not None and ranks % nodes:
        raise UserError(f"{key}.{ranks_key}: {ranks} ranks do not split evenly over nodes: {nodes} (each node runs "
                        "the same number)")

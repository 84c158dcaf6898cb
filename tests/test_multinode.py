"""More than one node, on loopback: a DeepSpeed TP entry as two nodes (node 0's torchrun agent and node 1's, started
by the agent the harness starts here, one c10d rendezvous on 127.0.0.1), its tokens against hf's; a rank lost on one
node, an agent that never joins, and the checks on `nodes` and `cluster`."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from backends.generate.deepspeed_tp import DeepSpeedBackend, DeepSpeedOptions
from backends.vllm_engine import VLLMBackend, VLLMOptions
from harness.config.cluster import ClusterConfig, validate_cluster
from harness.errors import UserError
from harness.run.cluster import ABORTED_REPORT_S, first_failure
from harness.run.node_agent import NODE_RANK_VARS
from harness.run.process_group import free_port
from tests.conftest import REPO, run_benchmark
from tests.contract import MARKER, assert_csv_contract, processes_with, rows, run_marked, write_sweep

TWO_NODES = "{name: deepspeed, device: cpu, tp_size: 2, nodes: 2}"


def cluster_sweep(path, backends: str, agents: str = "local", join_timeout_s: float = 120, **kwargs):
    yaml = write_sweep(path, backends, **kwargs)
    with open(yaml, "a") as f:
        f.write(f"cluster: {{nodes: 2, node_agents: {agents}, rendezvous: '127.0.0.1:{free_port()}', "
                f"join_timeout_s: {join_timeout_s}}}\n")
    return yaml


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multinode")
    yaml = cluster_sweep(tmp / "two.yaml", "{name: hf, device: cpu}, " + TWO_NODES + ", {name: deepspeed_zero, "
                         "device: cpu, num_ranks: 2, nodes: 2}", batch_sizes="[2, 4]", input_lengths="[16]")
    proc, marker = run_marked(yaml, "--output-dir", tmp / "out")
    return proc, tmp / "out", marker


@pytest.mark.engine
def test_two_nodes_on_loopback_match_hf_token_for_token(sweep):
    proc, out, marker = sweep
    assert proc.returncode == 0, proc.stderr
    assert_csv_contract(out, "deepspeed", points=4, num_batches=2, num_devices=2, tp_size=2)
    ds = [r for r in rows(out / "results.csv") if r["backend"] == "deepspeed"]
    assert {(r["status"], r["nodes"], r["pp_size"]) for r in ds} == {("ok", "2", "1")}
    assert {float(r["tokens_identical_share"]) for r in ds if int(r["output_length"]) > 1} == {1.0}
    zero = [r for r in rows(out / "results.csv") if r["backend"] == "deepspeed_zero"]  # ZeRO's ranks across nodes too
    assert {(r["status"], r["nodes"]) for r in zero} == {("ok", "2")}
    assert {float(r["tokens_identical_share"]) for r in zero if int(r["output_length"]) > 1} == {1.0}
    logs = out / "logs"
    assert "joined" in (logs / "node1-agent.log").read_text()  # node 1's ranks ran through its own agent
    assert (logs / "deepspeed.node1.log").exists()
    assert not processes_with(marker)  # the agent it started ended with the sweep


@pytest.mark.engine
def test_a_rank_lost_on_either_node_ends_the_entry_and_leaves_nothing_running(tmp_path):
    yaml = cluster_sweep(tmp_path / "two.yaml", TWO_NODES, batch_sizes="[1, 4, 8]", input_lengths="[16]",
                         output_lengths="[8]")
    proc, marker = run_marked(yaml, "--output-dir", tmp_path / "out", fault="segv@deepspeed/1/4")
    assert proc.returncode == 1, proc.stderr
    by_batch = {int(r["batch_size"]): r for r in rows(tmp_path / "out" / "results.csv")}
    assert by_batch[1]["status"] == "ok"
    error = by_batch[4]["error"]
    # Global rank 1 is on node 0 or node 1 (c10d numbers the nodes as they join): the row names which.
    assert by_batch[4]["status"] == "error" and "rank 1: SIGSEGV" in error and "during this point" in error, error
    assert error.startswith(("worker died (node 0, rank 1", "worker died (node 1 (")), error
    assert by_batch[8]["error"].startswith("not run: the deepspeed worker")
    assert not processes_with(marker)


@pytest.mark.engine
def test_an_agent_that_never_joins_costs_the_entry_error_rows_naming_the_node(tmp_path):
    yaml = cluster_sweep(tmp_path / "two.yaml", TWO_NODES, agents="external", join_timeout_s=2,
                         batch_sizes="[1]", input_lengths="[16]", output_lengths="[2]")
    proc, marker = run_marked(yaml, "--output-dir", tmp_path / "out")
    assert proc.returncode == 1, proc.stderr
    (row,) = rows(tmp_path / "out" / "results.csv")
    assert row["status"] == "error" and "node 1's agent did not join the rendezvous at 127.0.0.1:" in row["error"]
    assert "within 2 s" in row["error"] and "--node-agent" in row["error"]
    assert not processes_with(marker)


@pytest.mark.engine
@pytest.mark.parametrize("args,message", [
    (["--node-agent", "127.0.0.1:1"], "--node-rank: node 0 runs the sweep itself"),
    (["--node-agent", "nohost", "--node-rank", "1"], "--node-agent: 'nohost' is not HOST:PORT"),
    (["--node-rank", "1"], "--node-rank, --log-dir, --join-timeout-s: only with --node-agent HOST:PORT"),
    (["--node-agent", f"127.0.0.1:{free_port()}", "--node-rank", "1", "--join-timeout-s", "1"],
     "--node-agent: no rendezvous at 127.0.0.1:"),
])
def test_agent_command_line_errors_are_one_line(args, message):
    env = {k: v for k, v in os.environ.items() if k not in NODE_RANK_VARS}
    proc = run_benchmark(*args, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_nodes_split_the_ranks_and_count_per_node():
    options = DeepSpeedOptions(name="deepspeed", device="cpu", tp_size=4, nodes=2)
    placement = DeepSpeedBackend.resolve_placement(options)
    assert (placement.num_devices, placement.nodes, placement.ranks_per_node, placement.devices_per_node) == \
        (4, 2, 2, 2)
    assert DeepSpeedBackend.launch_env(options, placement)["LOCAL_SIZE"] == "2"
    with pytest.raises(UserError, match=r"backends\[0\]\.tp_size: 3 ranks do not split evenly over nodes: 2"):
        DeepSpeedOptions(name="deepspeed", tp_size=3, nodes=2).validate("backends[0]")


@pytest.mark.parametrize("cluster,message", [
    (ClusterConfig(nodes=1), r"backends\[0\]\.nodes: 2, but cluster\.nodes is 1"),
    (ClusterConfig(nodes=2, rendezvous="node1"), r"cluster\.rendezvous: 'node1' is not HOST:PORT"),
    (ClusterConfig(nodes=2, node_agents="ssh"), r"cluster\.node_agents: 'ssh' is not one of external, local"),
])
def test_cluster_checks_name_the_key(cluster, message):
    with pytest.raises(UserError, match=message):
        validate_cluster(cluster, [DeepSpeedOptions(name="deepspeed", nodes=2)], ["backends[0]"])


def test_the_root_cause_is_named_before_the_ranks_it_took_down(tmp_path):
    log = tmp_path / "node0.log"
    log.write_text("Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1\n")
    crashed = {1: {"host": "b", "returncode": 1, "aborted": False, "failed_rank": [3, -11]}}
    assert first_failure(1, log, crashed) == "node 1 (b), rank 3: SIGSEGV"
    stopped = {1: {"host": "b", "returncode": -15, "aborted": True, "failed_rank": None}}
    assert first_failure(1, log, stopped) == "node 0, rank 0: exit code 1"
    assert first_failure(-11, tmp_path / "missing.log", {}) == "SIGSEGV"


@pytest.mark.engine
def test_running_on_other_nodes_needs_the_rendezvous_planning_does_not(tmp_path):
    yaml = write_sweep(tmp_path / "two.yaml", TWO_NODES, batch_sizes="[1]", input_lengths="[16]", output_lengths="[2]")
    assert run_benchmark(yaml, "cluster.nodes=2", "--dry-run").returncode == 0
    proc = run_benchmark(yaml, "cluster.nodes=2", "--output-dir", tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr.startswith("error: cluster.rendezvous: required to run entries on "
                                                           "more than one node"), proc.stderr


@pytest.mark.parametrize("options,message", [
    ({"nodes": 2, "pp_size": 2}, r"backends\[0\]\.nodes: 2 needs distributed_executor_backend: ray and ray_address"),
    ({"nodes": 2, "distributed_executor_backend": "ray", "ray_address": "h:6379"},
     r"backends\[0\]\.pp_size: 1 pipeline stages do not split over nodes: 2"),
    ({"ray_address": "h:6379"}, r"backends\[0\]\.ray_address: only read with distributed_executor_backend: ray"),
    ({"distributed_executor_backend": "slurm"}, r"distributed_executor_backend: 'slurm' is not one of mp, ray"),
])
def test_vllm_across_nodes_goes_through_ray(options, message):
    with pytest.raises(UserError, match=message):
        VLLMOptions(name="vllm", **options).validate("backends[0]")


def test_vllm_places_tp_within_and_pp_across_nodes_and_says_why_ray_cannot_run_on_cpu():
    options = VLLMOptions(name="vllm", device="cpu", tp_size=8, pp_size=2, nodes=2,
                          distributed_executor_backend="ray", ray_address="10.0.0.1:6379")
    options.validate("backends[0]")
    placement = VLLMBackend.resolve_placement(options)
    assert (placement.num_devices, placement.devices_per_node, placement.tp_size, placement.pp_size) == (16, 8, 8, 2)
    assert VLLMBackend.launch_env(options, placement)["RAY_ADDRESS"] == "10.0.0.1:6379"
    assert "vLLM's CPU build does not run its Ray executor" in VLLMBackend.unsupported(options, "batch", None)


def descendants(pid: int) -> list:
    children = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rfind(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


@pytest.mark.engine
def test_a_node_that_dies_mid_point_ends_the_entry_naming_it(tmp_path):
    """Node 1 (its agent, torchrun and rank) killed outright while rank 1 is held in the batch-4 point."""
    yaml = cluster_sweep(tmp_path / "two.yaml", TWO_NODES, batch_sizes="[1, 4, 8]", input_lengths="[16]",
                         output_lengths="[8]")
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker, "BENCH_INJECT_FAULT": "slow@deepspeed/1/4"}
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(yaml), "--output-dir", str(out),
                             "--no-plots"], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out / "results.csv").exists() or len(rows(out / "results.csv")) < 1:
            assert time.monotonic() < deadline and proc.poll() is None, "batch 1 never finished"
            time.sleep(0.2)
        time.sleep(2)  # batch 4 is in flight: rank 1 sleeps SLOW_FAULT_S in it, wherever it runs
        (agent,) = [int(pid) for pid in processes_with(marker)
                    if b"--node-agent" in open(f"/proc/{pid}/cmdline", "rb").read()]
        for pid in descendants(agent):
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        assert proc.wait(timeout=180) == 1, proc.stderr.read()
        # Its heartbeat stopped: node 0 names it after SILENT_S (5 s) of silence, not ABORTED_REPORT_S (20 s).
        assert time.monotonic() - killed < ABORTED_REPORT_S
    finally:
        proc.kill()
    by_batch = {int(r["batch_size"]): r for r in rows(out / "results.csv")}
    assert by_batch[1]["status"] == "ok"
    assert by_batch[4]["error"].startswith("worker died (node 1: its agent never said how its ranks ended"), \
        by_batch[4]["error"]
    assert by_batch[8]["error"].startswith("not run: the deepspeed worker died (node 1")
    assert not processes_with(marker)


@pytest.mark.engine
def test_plan_counts_every_nodes_devices():
    proc = run_benchmark("yamls/405b-2nodes.yaml", "--plan", "hardware.gpu=h100-sxm", "hardware.num_gpus=8")
    assert proc.returncode == 0, proc.stderr
    assert "on 8 x h100-sxm per node" in proc.stdout and "cuda x16" in proc.stdout
    assert "1152.0 GiB" in proc.stdout  # 0.9 of 16 x 80 GiB: both nodes' memory

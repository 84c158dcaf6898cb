"""A two-node sweep through a real Slurm cluster of two node names on loopback (scripts/slurm_cluster.sh): submitted
with --slurm --submit, run by srun (node 0 the sweep, node 1 an agent), collected with --collect; a job that fails
before any point, collected as one line. `make test-slurm` runs it (it installs slurm-wlm and munge where missing);
`make test` skips it: a scheduler's daemons are not the suite's to start."""

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, run_benchmark
from tests.contract import rows

pytestmark = [pytest.mark.slurm, pytest.mark.skipif(
    not os.environ.get("BENCH_SLURM_CLUSTER"), reason="needs the local Slurm cluster: make test-slurm")]
CLUSTER = REPO / "scripts" / "slurm_cluster.sh"
JOB_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slurm")
    start = subprocess.run(["bash", str(CLUSTER), "start", str(folder / "cluster")], capture_output=True, text=True,
                           timeout=600)
    if start.returncode == 3:
        pytest.skip(start.stderr.strip())
    assert start.returncode == 0, start.stderr
    env = {**os.environ, "SLURM_CONF": str(folder / "cluster" / "etc" / "slurm.conf")}
    try:
        yield folder, env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(folder / "cluster")], env=env, timeout=120)


def template(folder, python=sys.executable) -> str:
    path = folder / "loopback.yaml"
    path.write_text(f"partition: debug\nnodes: 2\ntime: '00:10:00'\npython: {python}\noutput_root: {folder / 'jobs'}\n")
    return str(path)


def submit(env, *args) -> str:
    proc = run_benchmark(*args, "--submit", env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("submitted Slurm job ")[1].split(":")[0]


def wait(env, job_id: str) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, f"job {job_id} still queued or running after {JOB_TIMEOUT_S} s"
        time.sleep(1)


def test_a_two_node_sweep_is_submitted_run_and_collected(slurm):
    folder, env = slurm
    job_id = submit(env, "yamls/cpu-multinode.yaml", "--slurm", template(folder), "batch_sizes=[1]",
                    "output_lengths=[8]", "num_batches=2",
                    "backends=[{name: hf, device: cpu}, {name: deepspeed, device: cpu, tp_size: 2, nodes: 2}]")
    wait(env, job_id)
    proc = run_benchmark("--collect", job_id, "--output-dir", folder / "home", env=env)
    assert proc.returncode == 0, proc.stderr
    (collected,) = (folder / "home").iterdir()
    by_backend = {r["backend"]: r for r in rows(collected / "results.csv")}
    assert by_backend["deepspeed"]["status"] == "ok" and by_backend["deepspeed"]["nodes"] == "2"
    assert float(by_backend["deepspeed"]["tokens_identical_share"]) == 1.0  # against hf, in the same job
    node1_log = folder / "jobs" / collected.name / "logs" / "deepspeed.node1.log"
    assert node1_log.exists()  # node 1's ranks ran under its own agent


def test_a_job_that_fails_before_any_point_is_collected_as_one_line(slurm):
    folder, env = slurm
    job_id = submit(env, "yamls/cpu-multinode.yaml", "--slurm", template(folder, python="/nonexistent/python"))
    wait(env, job_id)
    proc = run_benchmark("--collect", job_id, "--output-dir", folder / "none", env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"error: --collect {job_id}: no results yet (job FAILED" in proc.stderr


def test_more_nodes_than_the_partition_has_submits_nothing(slurm):
    folder, env = slurm
    path = folder / "three.yaml"
    path.write_text("partition: debug\nnodes: 3\n")
    proc = run_benchmark("yamls/cpu-multinode.yaml", "--slurm", path, "--submit", env=env)
    assert proc.returncode == 2 and proc.stderr == f"error: {path}: nodes: 3, but partition debug has 2 (sinfo)\n"

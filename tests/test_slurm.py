"""Slurm without a cluster: the sbatch script a template and a sweep make (what --dry-run prints is what runs), the
template's checks, multi-node MosaicML templates, and --collect's one-line errors. A real cluster: test_slurm_cluster.py
(make test-slurm)."""

import pytest
import yaml

from app.cli import main
from slurm.script import SWEEP_EOF

SWEEP = ["yamls/cpu-multinode.yaml"]


def sweep_of(script: str) -> dict:
    """The sweep the script writes into its job folder (its heredoc)."""
    start = script.index(f"<<'{SWEEP_EOF}'\n") + len(SWEEP_EOF) + 4
    return yaml.safe_load(script[start:script.index(f"\n{SWEEP_EOF}\n")])


def test_the_script_runs_the_sweep_on_node_0_and_an_agent_on_every_other(capsys):
    assert main([*SWEEP, "--slurm", "slurm/h100-2nodes.yaml", "--dry-run"]) == 0
    script = capsys.readouterr().out
    for directive in ("--partition=gpu", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8", "--time=06:00:00",
                      "--exclusive", "--job-name=bench-cpu-multinode-h100-2nodes"):
        assert f"#SBATCH {directive}\n" in script
    assert "source .venv/bin/activate\n" in script
    sweep = sweep_of(script)
    assert sweep["benchmark_name"] == "cpu-multinode-h100-2nodes"
    assert sweep["cluster"] == {"nodes": 2, "rendezvous": None, "node_agents": "external", "join_timeout_s": 300.0}
    assert (sweep["hardware"]["gpu"], sweep["hardware"]["num_gpus"]) == ("h100-sxm", 8)
    assert '"cluster.rendezvous=$BENCH_RENDEZVOUS"' in script and "--emit-log-markers" in script
    assert 'benchmark.py --node-agent "$BENCH_RENDEZVOUS"' in script
    assert 'if [ "$SLURM_NODEID" = 0 ]' in script and "NodeAddr=" in script


@pytest.mark.parametrize("template,message", [
    ("partition: debug\nnodes: 1\n", "nodes: 1 node(s), but backends[1] (deepspeed-2-nodes) runs on 2"),
    ("partition: debug\nnodes: 2\ngpus: 8\n", "gpus: unknown key"),
    ("partition: debug\nnodes: 2\ntime: soon\n", "time: 'soon' is not a Slurm time"),
    ("partition: debug\nnodes: 2\nsbatch: [--nodes=4]\n", "sbatch[0]: --nodes=4 is set by the template's own keys"),
    ("partition: debug\nnodes: 2\ngpu: h100-sxm\n", "gpu: names the GPU of gpus_per_node, which is 0"),
])
def test_a_bad_template_is_one_line_naming_the_file_and_key(tmp_path, capsys, template, message):
    path = tmp_path / "part.yaml"
    path.write_text(template)
    assert main([*SWEEP, "--slurm", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_a_multinode_mcli_run_starts_an_agent_on_each_other_node(capsys):
    assert main([*SWEEP, "--mcli", "mcli/h100-x16.yaml"]) == 0
    run = yaml.safe_load(capsys.readouterr().out)
    assert run["compute"]["gpus"] == 16
    cluster, hardware = run["parameters"]["cluster"], run["parameters"]["hardware"]
    assert (cluster["nodes"], cluster["node_agents"], cluster["rendezvous"]) == (2, "external", None)
    assert (hardware["gpu"], hardware["num_gpus"]) == ("h100-sxm", 8)  # per node
    assert "--node-agent $MASTER_ADDR:29400" in run["command"]


def test_a_multinode_mcli_template_without_agents_is_refused(tmp_path, capsys):
    text = (tmp_path / "x.yaml")
    source = open("mcli/h100-x16.yaml").read()
    text.write_text(source.replace("--node-agent", "--no-agent"))
    assert main([*SWEEP, "--mcli", str(text)]) == 2
    assert "command: compute spans 2 nodes; node 0 must run the sweep" in capsys.readouterr().err


def test_entries_on_more_nodes_than_any_template_are_refused(capsys):
    assert main([*SWEEP, "--mcli", "mcli/h100-x8.yaml"]) == 2
    err = capsys.readouterr().err
    assert err == "error: mcli/h100-x8.yaml: compute: 1 node(s), but backends[1] (deepspeed-2-nodes) runs on 2: the " \
        "job must hold every node an entry runs on\n"


@pytest.mark.parametrize("args,message", [
    (["--collect", "987654321"], "--collect 987654321: no Slurm job 987654321 was submitted from here"),
    (["--collect", "12", "run-a"], "--collect: give platform run names or Slurm job ids (numbers), not both"),
    ([*SWEEP, "--mcli", "mcli/h100-x16.yaml", "--slurm", "slurm/h100-2nodes.yaml"], "--mcli, --slurm: one scheduler"),
])
def test_collect_and_scheduler_mistakes_are_one_line(capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err

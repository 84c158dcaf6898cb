"""Template + sweep -> one sbatch script. The script holds the whole resolved sweep (a heredoc), so what `--dry-run`
prints is exactly what runs. srun starts one task per node: node 0 runs the sweep and hosts the rendezvous, every
other node runs `benchmark.py --node-agent` against it (docs/measurement.md, "More than one node")."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any, Dict

import yaml

from harness.config.cluster import job_cluster
from slurm.template import SlurmTemplate, hardware_tag

SWEEP_EOF = "BENCH_SWEEP_EOF"


def job_name(parameters: Dict[str, Any]) -> str:
    """The job's name in squeue, and its folder's: the sweep's benchmark_name, already suffixed by the tag."""
    return f"bench-{parameters['benchmark_name']}"[:128]


def job_parameters(plain: Dict[str, Any], template: SlurmTemplate, path: Path) -> Dict[str, Any]:
    """The sweep as this template's job runs it: benchmark_name suffixed by the template's tag, its machine as
    `hardware`, its nodes as `cluster` (the rendezvous address is node 0's, known only once the job runs)."""
    out = copy.deepcopy(plain)
    out["benchmark_name"] = f"{plain['benchmark_name']}-{hardware_tag(path)}"
    hardware = dict(out.get("hardware") or {})
    if template.gpu and hardware.get("gpu") is None:
        hardware.update(gpu=template.gpu, num_gpus=template.gpus_per_node)
    if template.cost_per_hour is not None and hardware.get("cost_per_hour") is None:
        hardware["cost_per_hour"] = template.cost_per_hour
    out["hardware"] = hardware
    out["cluster"] = job_cluster(plain, template.nodes, f"{path}: nodes")
    return out


def render_script(parameters: Dict[str, Any], template: SlurmTemplate, path: Path) -> str:
    """The sbatch script: directives, setup, the sweep written into the job's folder, one srun task per node."""
    name = job_name(parameters)
    q = shlex.quote
    directives = [f"--job-name={name}", f"--partition={template.partition}", f"--nodes={template.nodes}",
                  "--ntasks-per-node=1", f"--time={template.time}", f"--output={template.jobs_dir}/%x-%j.log"]
    if template.gpus_per_node:
        directives.append(f"--gpus-per-node={template.gpus_per_node}")
    if template.account:
        directives.append(f"--account={template.account}")
    directives += template.sbatch
    sweep = yaml.safe_dump(parameters, sort_keys=False)
    node0 = (f'exec {q(template.python)} benchmark.py "$BENCH_JOB_DIR/sweep.yaml" '
             f'"cluster.rendezvous=$BENCH_RENDEZVOUS" --output-dir "$BENCH_JOB_DIR/results" --emit-log-markers '
             "--no-plots")
    agent = f'exec {q(template.python)} benchmark.py --node-agent "$BENCH_RENDEZVOUS" --log-dir "$BENCH_JOB_DIR/logs"'
    lines = [
        "#!/bin/bash",
        f"# Built by benchmark.py from {path} (see docs/guides/multinode.md); sbatch this file.",
        *(f"#SBATCH {d}" for d in directives),
        "set -euo pipefail",
        f"cd {q(template.project_dir)}",
        *template.setup,
        f'export BENCH_JOB_DIR={q(template.jobs_dir)}/"$SLURM_JOB_NAME-$SLURM_JOB_ID"',
        'mkdir -p "$BENCH_JOB_DIR/logs"',
        f"cat > \"$BENCH_JOB_DIR/sweep.yaml\" <<'{SWEEP_EOF}'",
        sweep.rstrip("\n"),
        SWEEP_EOF,
        "# Node 0's address as the other nodes reach it (Slurm's NodeAddr: a node name need not resolve).",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f'export BENCH_RENDEZVOUS="$(scontrol show node "$head" | grep -o "NodeAddr=[^ ]*" | cut -d= -f2):'
        f'{template.port}"',
        "# One task per node: node 0 runs the sweep, each other node an agent that runs its share of every entry.",
        "srun --ntasks-per-node=1 bash -c '",
        '  if [ "$SLURM_NODEID" = 0 ]; then',
        f"    {node0}",
        "  else",
        f"    {agent}",
        "  fi'",
    ]
    return "\n".join(lines) + "\n"

"""A Slurm template: what a partition's job asks for (nodes, GPUs, time) and how a node gets ready to run the
harness (its setup lines), checked on load: a typo'd key silently asking for the wrong machine costs a queue wait."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from harness.config.loading import read_yaml_mapping, to_dataclass
from harness.errors import UserError
from harness.fields import opt

REPO = Path(__file__).resolve().parents[1]
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{2}){0,2}$")  # sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]


@dataclass
class SlurmTemplate:
    partition: str = opt(help="The partition to queue on (sinfo lists them).")
    nodes: int = opt(1, help="Nodes the job holds; the sweep's cluster.nodes, so its entries may use up to this many.")
    gpus_per_node: int = opt(0, help="GPUs per node (--gpus-per-node); 0 for a CPU partition.")
    gpu: Optional[str] = opt(None, help="The GPU, as harness/peaks.yaml names it (e.g. h100-sxm): the sweep's "
                             "hardware.gpu, so the dry run plans for it and MBU/MFU use its peaks.")
    cost_per_hour: Optional[float] = opt(None, help="One GPU's price per hour: the sweep's hardware.cost_per_hour.")
    time: str = opt("04:00:00", help="Wall-time limit (--time): Slurm ends a hung job at it.")
    account: Optional[str] = opt(None, help="--account, where the cluster bills jobs to accounts.")
    workdir: Optional[str] = opt(None, help="This project's folder as every node sees it (a shared filesystem); "
                                 "default: this checkout.")
    output_root: Optional[str] = opt(None, help="Shared folder each job's folder (sweep, results, log) goes in; "
                                     "default: results/slurm under workdir.")
    setup: List[str] = opt(factory=list, help="Shell lines each job runs first, on node 0 (e.g. module load, "
                           "source .venv/bin/activate); the other nodes inherit its environment through srun.")
    python: str = opt("python", help="The Python that runs benchmark.py, after setup.")
    port: int = opt(29400, help="Port on node 0 for the rendezvous (cluster.rendezvous).")
    sbatch: List[str] = opt(factory=list, help="More sbatch options, one each, e.g. --exclusive or --qos=high.")

    @property
    def project_dir(self) -> str:
        return self.workdir or str(REPO)

    @property
    def jobs_dir(self) -> str:
        return self.output_root or f"{self.project_dir}/results/slurm"


def load_template(path: Path) -> SlurmTemplate:
    """A template's fields, typed and checked; every failure is one line naming the file and key."""
    raw = read_yaml_mapping(Path(path), "Slurm template", "template fields (partition, nodes, ...)")
    try:
        template = to_dataclass(SlurmTemplate, raw)
        check_template(template)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None
    return template


def check_template(t: SlurmTemplate) -> None:
    if not re.match(r"^[A-Za-z0-9_.-]+$", t.partition or ""):
        raise UserError(f"partition: {t.partition!r} is not a partition name (sinfo lists them)")
    for key in ("nodes", "gpus_per_node", "port"):
        low = 0 if key == "gpus_per_node" else 1
        if getattr(t, key) < low:
            raise UserError(f"{key}: must be at least {low}, got {getattr(t, key)}")
    if t.port > 65535:
        raise UserError(f"port: must be a TCP port (1-65535), got {t.port}")
    if not _TIME_RE.match(str(t.time)):
        raise UserError(f"time: {t.time!r} is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)")
    if t.gpu is not None:
        from harness.config.gpus import gpu_table

        if t.gpu not in gpu_table():
            raise UserError(f"gpu: {t.gpu!r} is not in harness/peaks.yaml (known: {', '.join(gpu_table())})")
        if not t.gpus_per_node:
            raise UserError("gpu: names the GPU of gpus_per_node, which is 0")
    for i, option in enumerate(t.sbatch):
        if not str(option).startswith("--") or "\n" in str(option):
            raise UserError(f"sbatch[{i}]: {option!r} is not one sbatch option (e.g. --exclusive)")
        if str(option).split("=")[0] in SET_BY_TEMPLATE:
            raise UserError(f"sbatch[{i}]: {option} is set by the template's own keys")


SET_BY_TEMPLATE = ("--partition", "--nodes", "--ntasks-per-node", "--gpus-per-node", "--time", "--account",
                   "--output", "--job-name")


def hardware_tag(path: Path) -> str:
    """The template's file name as a name part: slurm/h100-2nodes.yaml -> 'h100-2nodes' (suffixes benchmark_name)."""
    tag = re.sub(r"[^a-z0-9]+", "-", Path(path).stem.lower()).strip("-")
    if not tag:
        raise UserError(f"{path}: file name gives no hardware tag; name it like h100-2nodes.yaml")
    return tag



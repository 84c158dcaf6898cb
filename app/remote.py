"""Sweeps on a scheduler: MosaicML platform runs (`--mcli`) and Slurm jobs (`--slurm`), built from compute or job
templates, printed or submitted, and their results brought home (`--collect`)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

from rich.console import Console

from app.console import console, err_console, print_capacity
from backends.registry import BACKENDS
from harness.config.sweep import SweepConfig, to_plain
from harness.errors import UserError
from harness.model.hardware import Machine, planning_for
from harness.model.spec import ModelSpec
from harness.plan.capacity import plan_capacity
from workloads.base import Workload

RESULTS_ROOT = Path(__file__).resolve().parent.parent / "results"


def print_capacities(config: SweepConfig, models: List[Tuple[ModelSpec, Workload]], machine: Optional[Machine],
                     to: Console = console) -> None:
    """`--plan`: one table per model."""
    for model, workload in models:
        capacity = plan_capacity(config, model, BACKENDS, workload)
        print_capacity(capacity, machine, model.label if len(models) > 1 else None, to=to)


def launch_remote(config: SweepConfig, models: List[Tuple[ModelSpec, Workload]], templates: List[Path],
                  submit: bool) -> int:
    """One platform run per compute template; a dry run prints them (stdout: exactly what would be submitted) and,
    on stderr, what fits each template's machine by the estimate (`--plan` for it)."""
    import mosaic.runs as mosaic

    runs = mosaic.build_run_configs(to_plain(config), templates)
    if not submit:
        print("---\n".join(mosaic.render_run_yaml(run) for run in runs), end="")
        for template in templates:
            found = mosaic.template_machine(template)
            if found is not None:
                machine = Machine(*found)
                with planning_for(machine):
                    print_capacities(config, models, machine, to=err_console)
        return 0
    names = mosaic.submit(runs)
    for name in names:
        console.print(f"submitted {name}: follow with `{mosaic.follow_command(name)}`")
    console.print(f"When they finish: python benchmark.py --collect {' '.join(names)}")
    return 0


def collect(run_names: List[str], output_root: Path) -> int:
    import mosaic.runs as mosaic

    for folder in mosaic.collect(run_names, output_root):
        console.print(f"{folder}/  (plot with: python -m plots {folder})")
    return 0


def launch_slurm(config: SweepConfig, templates: List[Path], submit: bool) -> int:
    """One sbatch script per Slurm template; without --submit, printed (exactly what sbatch would get)."""
    from slurm import jobs
    from slurm.script import job_name, job_parameters, render_script
    from slurm.template import hardware_tag, load_template

    tags = [hardware_tag(path) for path in templates]
    if len(set(tags)) < len(tags):
        raise UserError("--slurm: two templates give one hardware tag; each template needs its own file name")
    scripts = []
    for path in templates:
        template = load_template(path)
        parameters = job_parameters(to_plain(config), template, path)
        scripts.append((path, template, job_name(parameters), render_script(parameters, template, path)))
    if not submit:
        print("".join(script for *_, script in scripts), end="")
        return 0
    for job_id in jobs.submit(scripts, RESULTS_ROOT):
        console.print(f"submitted Slurm job {job_id}: follow with `squeue -j {job_id}`")
    console.print("When they finish: python benchmark.py --collect JOBID ...")
    return 0


def collect_slurm(job_ids: List[str], output_root: Path) -> int:
    from slurm import jobs

    for folder, state in jobs.collect(job_ids, output_root, RESULTS_ROOT):
        note = "" if state in (None, "COMPLETED") else f"  (job {state}: what it finished)"
        console.print(f"{folder}/  (plot with: python -m plots {folder}){note}")
    return 0

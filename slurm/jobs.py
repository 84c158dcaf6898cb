"""Submitting sbatch scripts and bringing a job's results home.

A submitted job is recorded under results/slurm/JOBID.json (its script, folder and log on the shared filesystem), so
`--collect JOBID` knows where to look: the job's results folder when this machine sees it, else the rows and files
its node 0 printed into the job's log (harness/measure/logmarkers.py), the way platform runs come home.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from harness.errors import UserError
from harness.measure import logmarkers
from slurm.template import SlurmTemplate

RECORDS = "slurm"  # under the results root: JOBID.json per submitted job, and the scripts
FINISHED_OK = ("COMPLETED",)
COMMAND_S = 60


def _slurm(*args: str) -> subprocess.CompletedProcess:
    """A Slurm command; UserError where Slurm's commands are not installed here."""
    try:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=COMMAND_S)
    except FileNotFoundError:
        raise UserError(f"{args[0]}: not found; --submit and --collect run where Slurm's commands are (a login "
                        "node)") from None


def check_partition(template: SlurmTemplate, path: Path) -> None:
    """The partition exists and has the template's nodes: sbatch would queue a job no partition can ever run."""
    proc = _slurm("sinfo", "-h", "-p", template.partition, "-o", "%D")
    counts = [int(n) for n in proc.stdout.split() if n.isdigit()]
    if proc.returncode != 0 or not counts:
        raise UserError(f"{path}: partition: {template.partition!r} is not a partition of this cluster (sinfo)")
    if sum(counts) < template.nodes:
        raise UserError(f"{path}: nodes: {template.nodes}, but partition {template.partition} has {sum(counts)} "
                        "(sinfo)")


def submit(scripts: Sequence[Tuple[Path, SlurmTemplate, str, str]], records_root: Path) -> List[str]:
    """`sbatch` each (template path, template, job name, script); every partition is checked before the first one
    is submitted. Returns the job ids."""
    for path, template, _, _ in scripts:
        check_partition(template, path)
    folder = records_root / RECORDS
    folder.mkdir(parents=True, exist_ok=True)
    submitted: List[str] = []
    for path, template, name, text in scripts:
        Path(template.jobs_dir).mkdir(parents=True, exist_ok=True)  # sbatch writes the log there, not creating it
        script = folder / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.sbatch"
        script.write_text(text)
        proc = _slurm("sbatch", "--parsable", str(script))
        if proc.returncode != 0:
            done = f"; already submitted: {', '.join(submitted)}" if submitted else "; nothing was submitted"
            why = " ".join((proc.stderr or proc.stdout).split()) or f"exit code {proc.returncode}"
            raise UserError(f"sbatch {script.name}: {why}{done}")
        job_id = proc.stdout.strip().split(";")[0]
        record = {"job_id": job_id, "template": str(path), "script": str(script),
                  "folder": f"{template.jobs_dir}/{name}-{job_id}", "log": f"{template.jobs_dir}/{name}-{job_id}.log"}
        (folder / f"{job_id}.json").write_text(json.dumps(record, indent=2) + "\n")
        submitted.append(job_id)
    return submitted


def job_state(job_id: str) -> Optional[str]:
    """`RUNNING`, `COMPLETED`, `FAILED (exit 1:0)`, ...: squeue while it is queued or running, then scontrol (which
    forgets a job minutes after it ends), then sacct where the cluster keeps accounts; None if none knows it."""
    proc = _slurm("squeue", "-h", "-j", job_id, "-o", "%T")
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.split()[0]
    proc = _slurm("scontrol", "show", "job", "-o", job_id)
    fields = dict(part.split("=", 1) for part in proc.stdout.split() if "=" in part)
    if proc.returncode == 0 and "JobState" in fields:
        return _state(fields["JobState"], fields.get("ExitCode", ""))
    proc = _slurm("sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode")
    if proc.returncode == 0 and proc.stdout.strip():
        state, _, code = proc.stdout.splitlines()[0].partition("|")
        return _state(state.split()[0], code)
    return None


def _state(state: str, exit_code: str) -> str:
    return state if state in FINISHED_OK or not exit_code else f"{state} (exit {exit_code})"


def collect(job_ids: Sequence[str], output_root: Path, records_root: Path) -> List[Tuple[Path, Optional[str]]]:
    """Each job's results into output_root/<job folder name>/: (folder, the job's state). Every job is read before
    anything is written, so one bad id writes nothing."""
    found = [(job_id, *_results_of(job_id, records_root)) for job_id in job_ids]
    out = []
    for job_id, record, files, state in found:
        folder = Path(output_root) / Path(record["folder"]).name
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_bytes(text.encode("utf-8"))  # bytes: the CSVs' CRLF as written
        out.append((folder, state))
    return out


def _results_of(job_id: str, records_root: Path) -> Tuple[dict, Dict[str, str], Optional[str]]:
    record_path = records_root / RECORDS / f"{job_id}.json"
    if not job_id.isdigit() or not record_path.is_file():
        raise UserError(f"--collect {job_id}: no Slurm job {job_id} was submitted from here ({record_path} is "
                        "missing)")
    record = json.loads(record_path.read_text())
    state = job_state(job_id)
    results = Path(record["folder"]) / "results"
    if (results / "results.csv").is_file():
        files = {p.name: p.read_bytes().decode("utf-8") for p in results.iterdir() if p.is_file()}
        return record, files, state
    try:
        files = logmarkers.parse(Path(record["log"]).read_text(errors="replace"))
    except OSError:
        files = {}
    if "results.csv" not in files:
        raise UserError(f"--collect {job_id}: no results yet (job {state or 'unknown to Slurm'}; no point has "
                        f"finished, or the job failed before one did; its log: {record['log']})")
    return record, files, state


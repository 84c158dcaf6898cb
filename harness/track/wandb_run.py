"""A sweep in Weights & Biases, which has no nested runs: its equivalent, a group named after the results folder
holding one run for the sweep (its config and the manifest's hardware and software as config, the folder's files)
and one run per entry (its options as config, one history row per point: `<point>/<column>`). Offline (mode:
offline), the runs are written under the results folder's wandb/ for `wandb sync` later; online, WANDB_API_KEY comes
from the environment."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any, Dict, Mapping, Sequence, Set, cast

from harness.config.sections import WandbConfig
from harness.track import content
from harness.track.state import write_state

WANDB_DIR = "wandb"  # under the results folder: offline runs, and W&B's own files for online ones
INIT_TIMEOUT_S = 30  # W&B waits 90 s for its service by default; a tracker that is down must not hold the sweep up


class WandbRun:
    name = "wandb"

    def __init__(self, config: WandbConfig, state: Dict[str, Any], state_root: Dict[str, Any]):
        os.environ.setdefault("WANDB_SILENT", "true")  # W&B's own lines (a symlinked file, a synced run): the sweep
        import wandb                                   # says where the runs went, once

        self.config, self.state, self.state_root, self.wandb = config, state, state_root, wandb
        self.runs: Dict[str, Any] = {}  # open runs by name: "" for the sweep's, else the entry's run name

    def open(self, manifest: Mapping[str, Any], folder: Path) -> None:
        """Every run of the sweep, resumed by the ids tracking.json holds (a resumed sweep) or made with new ones
        (saved before W&B is asked, so that a sweep killed while it starts a run resumes that run)."""
        if self.runs:
            return
        s = self.state
        project = self.config.project or manifest["config"]["benchmark_name"]
        s.update(project=project, entity=self.config.entity, group=s.get("group") or folder.name)
        (folder / WANDB_DIR).mkdir(exist_ok=True)
        entries = s.setdefault("entries", {})
        runs = content.entry_runs(manifest)
        several = len({model for model, _, _ in runs}) > 1
        s.setdefault("run_id", secrets.token_hex(4))
        for model, label, _ in runs:
            entries.setdefault(content.run_name(model, label, several), {"run_id": secrets.token_hex(4),
                                                                         "sent": []})
        write_state(folder, self.state_root)  # the ids before W&B is asked
        facts = {**content.sweep_params(manifest), **content.tags(manifest)}
        self.runs[""] = self._init(folder, s["run_id"], folder.name, "sweep", facts)
        for model, label, entry in runs:
            name = content.run_name(model, label, several)
            self.runs[name] = self._init(folder, entries[name]["run_id"], name, "entry",
                                         {**content.entry_params(entry), "model": model, "entry": label})

    def sent(self, run: str) -> Set[str]:
        return set(self.state["entries"][run]["sent"])

    def send(self, run: str, points: Mapping[str, Mapping[str, float]]) -> None:
        """One history row per point, at its place in the entry's order (the points sent before it). W&B drops a
        row logged below the run's current step, so online, a point a kill left unrecorded in tracking.json and sent
        again after the resume is not recorded twice; an offline run cannot know its steps after a resume."""
        step = len(self.state["entries"][run]["sent"])
        for point, figures in points.items():
            self.runs[run].log({f"{point}/{name}": value for name, value in figures.items()}, step=step)
            step += 1

    def finish(self, files: Sequence[Path], folder: Path, interrupted: bool) -> None:
        """The folder's files saved with the sweep's run, then every run finished (exit code 1 when interrupted)."""
        quiet = logging.getLogger("wandb")
        level, quiet.level = quiet.level, logging.ERROR  # "Symlinked 1 file into the W&B run directory", per file
        try:
            for path in files:
                self.runs[""].save(str(path), base_path=str(folder), policy="now")
        finally:
            quiet.setLevel(level)
        for run in self.runs.values():
            run.finish(exit_code=1 if interrupted else 0)
        self.runs = {}

    def where(self) -> str:
        mode = "offline, under wandb/" if self.config.mode == "offline" else "online"
        return f"W&B project {self.state.get('project')}, group {self.state.get('group')} ({mode})"

    def _init(self, folder: Path, run_id: str, name: str, job_type: str, config: Dict[str, Any]):
        settings = self.wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True,
                                       save_code=False, init_timeout=INIT_TIMEOUT_S)
        return self.wandb.init(project=self.state["project"], entity=self.config.entity, dir=str(folder),
                               id=run_id, name=name, group=self.state["group"], job_type=job_type, config=config,
                               mode=cast(Any, self.config.mode), resume="allow", reinit="create_new", settings=settings)

"""A sweep in MLflow: one run in the experiment (the sweep's config as parameters, the manifest's hardware and
software as tags, the folder's files as artifacts) and a nested run per entry (its options as parameters, its
points' figures as metrics `<point>/<column>`), through MLflow's REST API (harness/track/mlflow_rest.py)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Set

from harness.config.sections import MlflowConfig
from harness.track import content
from harness.track.mlflow_rest import MlflowRest
from harness.track.state import write_state

# MLflow takes at most 1000 metrics and 100 parameters per log-batch call.
METRICS_PER_CALL, PARAMS_PER_CALL = 1000, 100
SWEEP_TAG = "bench.sweep_id"  # tags each run with the sweep it belongs to (tracking.json's sweep_id)
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a run under the run it names


class MlflowRun:
    name = "mlflow"

    def __init__(self, config: MlflowConfig, state: Dict[str, Any], state_root: Dict[str, Any]):
        self.config, self.state, self.state_root = config, state, state_root  # its own part, and tracking.json's
        self.api = MlflowRest(config.tracking_uri)
        self._asked: Set[str] = set()  # entry runs whose metrics were read back from the server once

    def open(self, manifest: Mapping[str, Any], folder: Path) -> None:
        """The sweep's run and its entries' runs: those tracking.json names (a resumed sweep), else made now. Each is
        tagged with the sweep's id, saved before any is made, so that a sweep killed between making a run and saving
        its id finds that run again instead of making a second one."""
        s = self.state  # FolderTracking refused a folder whose runs are on another server
        if "experiment_id" not in s:
            name = self.config.experiment or manifest["config"]["benchmark_name"]
            # the server is named once it answered: a folder whose server was down may go to another one later
            s.update(experiment_id=self.api.experiment_id(name) or self.api.create_experiment(name),
                     tracking_uri=self.config.tracking_uri)
        s.setdefault("sweep_id", uuid.uuid4().hex)
        write_state(folder, self.state_root)
        if "run_id" not in s:
            s["run_id"] = self._run(folder.name, content.tags(manifest))
            write_state(folder, self.state_root)
        self._log_params(s["run_id"], content.sweep_params(manifest))
        entries = s.setdefault("entries", {})
        runs = content.entry_runs(manifest)
        several = len({model for model, _, _ in runs}) > 1
        for model, label, entry in runs:
            name = content.run_name(model, label, several)
            if name not in entries:
                tags = {**content.tags(manifest), PARENT_TAG: s["run_id"], "model": model, "entry": label}
                entries[name] = {"run_id": self._run(name, tags), "sent": []}
                write_state(folder, self.state_root)
            self._log_params(entries[name]["run_id"], content.entry_params(entry))

    def sent(self, run: str) -> Set[str]:
        """Points the entry's run holds: tracking.json's, and any whose metrics reached the server just before a
        kill left tracking.json behind (read back once per process)."""
        entry = self.state["entries"][run]
        if run in self._asked:
            return set(entry["sent"])
        logged = self.api.get_run(entry["run_id"]).get("data", {}).get("metrics", [])
        self._asked.add(run)
        return set(entry["sent"]) | {m["key"].split("/", 1)[0] for m in logged}

    def send(self, run: str, points: Mapping[str, Mapping[str, float]]) -> None:
        run_id, now_ms = self.state["entries"][run]["run_id"], int(time.time() * 1000)
        batch: List[Dict[str, Any]] = []
        for point, figures in points.items():  # a point's metrics in one call: a kill leaves all of them or none
            if batch and len(batch) + len(figures) > METRICS_PER_CALL:
                self.api.log_batch(run_id, metrics=batch)
                batch = []
            batch += [{"key": f"{point}/{name}", "value": value, "timestamp": now_ms, "step": 0}
                      for name, value in figures.items()]
        if batch:
            self.api.log_batch(run_id, metrics=batch)

    def finish(self, files: Sequence[Path], folder: Path, interrupted: bool) -> None:
        """The folder's files as the sweep run's artifacts (report.md and report.html under plots/), and every run
        ended: FINISHED, or KILLED for an interrupted sweep (a resumed one ends them again)."""
        run = self.api.get_run(self.state["run_id"])
        for path in files:
            parent = path.parent.relative_to(folder).as_posix()
            self.api.log_artifact(run, path, None if parent == "." else parent)
        status = "KILLED" if interrupted else "FINISHED"
        for entry in self.state["entries"].values():
            self.api.set_terminated(entry["run_id"], status)
        self.api.set_terminated(self.state["run_id"], status)

    def where(self) -> str:
        return f"{self.config.tracking_uri}, run {self.state.get('run_id', '?')}"

    def _run(self, name: str, tags: Dict[str, str]) -> str:
        """The run of this sweep named `name`: found by its tags, or made."""
        sweep = self.state["sweep_id"]
        found = self.api.search_runs(self.state["experiment_id"], f"tags.`{SWEEP_TAG}` = '{sweep}' and "
                                     f"attributes.run_name = '{name.replace(chr(39), '')}'")
        if found:
            return found[0]["info"]["run_id"]
        return self.api.create_run(self.state["experiment_id"], name, {**tags, SWEEP_TAG: sweep})

    def _log_params(self, run_id: str, params: Dict[str, str]) -> None:
        """The parameters the run does not hold yet: those a kill cut short; a resumed sweep's changed timeouts
        (keys that measure nothing) keep the values it started with, as MLflow's parameters never change."""
        held = {p["key"] for p in self.api.get_run(run_id).get("data", {}).get("params", [])}
        items = [{"key": k, "value": v} for k, v in params.items() if k not in held]
        for i in range(0, len(items), PARAMS_PER_CALL):
            self.api.log_batch(run_id, params=items[i:i + PARAMS_PER_CALL])

"""A results folder sent to the sweep's trackers: what they have not been sent yet, from the folder's sound rows
(a damaged row is never data: harness/measure/writers.py's read_rows), so the same call serves a sweep as it runs,
a resumed one, and `python -m plots --track DIR` after either (docs/guides/tracking.md).

A tracker that fails (down, refusing, its package missing) is said once and left alone for the rest of the sweep:
it never stops it. What reached it and where is kept in tracking.json (harness/track/state.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from harness.config.sections import TrackingConfig
from harness.errors import UserError
from harness.files import read_utf8
from harness.measure.columns.names import R
from harness.measure.writers import ResultsDir, read_rows
from harness.track import content
from harness.track.state import read_state, write_state


class FolderTracking:
    """The sweep's trackers for one results folder: `sync` sends the rows not yet sent, `finish` the files too, and
    `outcome` says per tracker where it went or why it did not (the manifest's `tracking`)."""

    def __init__(self, folder: Path, tracking: TrackingConfig):
        self.folder, self.config = Path(folder), tracking
        self.state = read_state(self.folder)  # UserError for a damaged one: before anything is sent
        held = self.state.get("mlflow", {}).get("tracking_uri")
        if tracking.mlflow is not None and held not in (None, tracking.mlflow.tracking_uri):
            raise UserError(f"tracking.mlflow.tracking_uri: {self.folder}'s runs are in {held} (tracking.json), not "
                            f"{tracking.mlflow.tracking_uri}; track it there, or move tracking.json aside to start "
                            "new runs")
        self.trackers: Dict[str, Any] = {}
        self.failed: Dict[str, str] = {}  # tracker -> why it stopped
        self.opened = False

    def sync(self) -> List[str]:
        """Send what is new; returns one line per tracker that failed now."""
        manifest = self._manifest()
        if manifest is None:
            return []
        lines = self._open(manifest)
        rows = read_rows(self.folder / "results.csv") if (self.folder / "results.csv").exists() else []
        several = len({model for model, _, _ in content.entry_runs(manifest)}) > 1
        by_run: Dict[str, List[Mapping[str, str]]] = defaultdict(list)
        for row in rows:
            by_run[content.run_name(row[R.model], row[R.backend], several)].append(row)
        for name, tracker in list(self.trackers.items()):
            lines += self._guarded(name, lambda: self._send(tracker, name, by_run))
        return lines

    def finish(self) -> List[str]:
        """The last rows, the folder's files, and every run ended: as interrupted where the manifest says the sweep
        was (Ctrl-C)."""
        lines = self.sync()
        interrupted = bool((self._manifest() or {}).get("interrupted"))
        files = [self.folder / name for name in content.ARTIFACTS if (self.folder / name).is_file()]
        for name, tracker in list(self.trackers.items()):
            lines += self._guarded(name, lambda: tracker.finish(files, self.folder, interrupted))
        return lines

    def outcome(self) -> Dict[str, Dict[str, Any]]:
        """Per tracker configured: `sent` (where) or `failed` (why), for the manifest."""
        out = {}
        for name in self._configured():
            if name in self.failed:
                out[name] = {"result": "failed", "error": self.failed[name]}
            elif name in self.trackers:
                out[name] = {"result": "sent", "where": self.trackers[name].where()}
        return out

    def record(self) -> Dict[str, Dict[str, Any]]:
        """The outcome written into manifest.json's `tracking` (as the sweep writes the manifest), and returned."""
        outcome = self.outcome()
        manifest = self._manifest()
        if manifest is not None:
            manifest["tracking"] = {**manifest.get("tracking", {}), **outcome}
            ResultsDir(self.folder).write_manifest(manifest)
        return outcome

    def _configured(self) -> List[str]:
        return [name for name in ("mlflow", "wandb") if getattr(self.config, name) is not None]

    def _open(self, manifest: Mapping[str, Any]) -> List[str]:
        if self.opened:
            return []
        self.opened = True
        lines: List[str] = []
        for name in self._configured():
            def start(name: str = name) -> None:
                tracker = _tracker(name, getattr(self.config, name), self.state.setdefault(name, {}), self.state)
                tracker.open(manifest, self.folder)
                write_state(self.folder, self.state)
                self.trackers[name] = tracker
            lines += self._guarded(name, start)
        return lines

    def _send(self, tracker: Any, name: str, by_run: Mapping[str, List[Mapping[str, str]]]) -> None:
        entries = self.state[name]["entries"]
        for run, rows in by_run.items():
            if run not in entries:  # a row of an entry the manifest does not list: not this sweep's
                continue
            done = tracker.sent(run)
            new = {point: figures for point, figures in content.point_metrics(rows).items() if point not in done}
            if new:
                tracker.send(run, new)
                entries[run]["sent"] = sorted(done | set(new))
                write_state(self.folder, self.state)

    def _guarded(self, name: str, step) -> List[str]:
        """Run `step` for tracker `name` unless it has failed; a failure is one line, once, and ends its part."""
        if name in self.failed:
            return []
        try:
            step()
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - any tracker error (network, refusal, a missing package) is said
            self.failed[name] = short_reason(e)
            self.trackers.pop(name, None)
            return [f"tracking.{name}: {self.failed[name]}; the results are in {self.folder}; send them later with "
                    f"python -m plots --track {self.folder}"]
        return []

    def _manifest(self) -> Optional[Dict[str, Any]]:
        path = self.folder / "manifest.json"
        if not path.exists():
            return None
        try:
            return json.loads(read_utf8(path, "manifest"))
        except ValueError as e:
            raise UserError(f"{path}: not JSON ({e})") from None


def _tracker(name: str, config: Any, state: Dict[str, Any], root: Dict[str, Any]):
    """Tracker `name` over its part of tracking.json (`state`; `root`: the whole, which it saves as it makes runs)."""
    if name == "mlflow":
        from harness.track.mlflow_run import MlflowRun

        return MlflowRun(config, state, root)
    from harness.track.wandb_run import WandbRun

    return WandbRun(config, state, root)


# What a tracker's client says when it cannot reach the server, as the one line names it.
_UNREACHABLE = (("Connection refused", "connection refused"), ("Name or service not known", "unknown host"),
                ("timed out", "timed out"))


def short_reason(error: Exception) -> str:
    """An exception as one short line: `cannot reach the server (connection refused)` for what the trackers' HTTP
    clients say at length, else its type and the start of its message."""
    text = " ".join(str(error).split())
    for needle, reason in _UNREACHABLE:
        if needle in text:
            return f"cannot reach the server ({reason})"
    return f"{type(error).__name__}: {text[:200]}"


def folder_tracking_config(folder: Path, mlflow_uri: Optional[str] = None, wandb_project: Optional[str] = None,
                           wandb_mode: Optional[str] = None) -> TrackingConfig:
    """The trackers a finished folder is sent to: its sweep's (config.yaml's `tracking`), with a tracker given on
    the command line added or put in its place. UserError where none is named."""
    from harness.config.loading import read_yaml_mapping, to_dataclass
    from harness.config.sections import MlflowConfig, WandbConfig, validate_tracking

    path = Path(folder) / "config.yaml"
    if not path.is_file():
        raise UserError(f"{folder}: no config.yaml: not a results folder benchmark.py wrote")
    raw = read_yaml_mapping(path).get("tracking") or {}
    tracking = to_dataclass(TrackingConfig, raw, "tracking")
    if mlflow_uri is not None:
        tracking.mlflow = MlflowConfig(tracking_uri=mlflow_uri,
                                       experiment=tracking.mlflow.experiment if tracking.mlflow else None)
    if wandb_project is not None or wandb_mode is not None:
        base = tracking.wandb or WandbConfig()
        tracking.wandb = WandbConfig(project=wandb_project or base.project, entity=base.entity,
                                     mode=wandb_mode or base.mode)
    validate_tracking(tracking)
    if not tracking.any:
        raise UserError(f"{path}: its sweep named no tracker (no tracking section); give --mlflow-uri URI or "
                        "--wandb-project NAME")
    return tracking

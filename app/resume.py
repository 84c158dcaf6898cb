"""`--resume`: whether a results folder's rows can be continued by this config (app/cli.py asks before a sweep)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.config.stream import StreamConfig
from harness.config.sweep import SweepConfig, SweepYaml, to_plain
from harness.errors import UserError

# Keys whose change makes earlier rows incomparable with new ones (the axes themselves, batch sizes, lengths, rates
# and caps, may grow: new points are simply run).
RESUME_KEYS = ("benchmark_name", "model", "workload", "sampling", "num_batches", "stop", "num_warmup_batches", "seed",
               "scenario", "stream.arrival", "stream.burstiness", "stream.ramp", "stream.stages",
               "stream.num_requests", "stream.num_warmup_requests", "stream.seed",
               "stream.slo", "stream.trace", "stream.trace_format", "stream.time_scale", "stream.window",
               "stream.release")  # it changes how late requests leave, and a spin slows an engine on its CPU


def check_resumable(previous: dict, config: SweepConfig, path: Path) -> None:
    """Refuse to mix rows measured under a different model, workload, sampling, seed or batch count into one folder."""
    if not previous:
        return
    now = to_plain(config)
    for key in RESUME_KEYS:
        before, after = _lookup(previous["config"], key), _lookup(now, key)
        if before is _ABSENT and after == _default(key):
            continue  # a key newer than the folder, left at its default: the rows were measured the same way
        if before != after:
            raise UserError(f"--resume: {path} was measured with {key}={before!r}, this config has {after!r}; "
                            "use a new --output-dir")
    before, after = previous["config"].get("models"), now.get("models")
    if before != after and not (before and after and all(model in after for model in before)):
        raise UserError(f"--resume: {path} was measured with models={before!r}; this config changes or removes one "
                        f"of them ({after!r}): models may be added on resume, never changed; else use a new "
                        "--output-dir")


_ABSENT = object()  # a key the folder's config does not hold at all


def _lookup(config: object, dotted: str):
    for part in dotted.split("."):
        if not isinstance(config, dict) or part not in config:
            return None if config is None else _ABSENT
        config = config[part]
    return config


def _default(dotted: str) -> object:
    """A key's value where the YAML leaves it out, as `to_plain` writes it: a top-level key's or a stream key's
    (others: none, so a key missing from a folder's config never matches)."""
    section, _, name = dotted.partition(".")
    if not name:
        found = {f.name: f for f in dataclasses.fields(SweepYaml)}.get(section)
        return _ABSENT if found is None or found.default is dataclasses.MISSING else found.default
    if section != "stream" or not hasattr(StreamConfig(), name):
        return _ABSENT
    value = getattr(StreamConfig(), name)
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value

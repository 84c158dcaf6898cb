"""`--resume`: whether a results folder's rows can be continued by this config (app/cli.py asks before a sweep).

Every key that changes a measurement must be what the folder's rows were measured with: the whole config, each
backend entry's options included, is compared with the manifest's, key by key. What may differ: the sweep's axes
(new batch sizes, lengths, rates and caps are new points, simply run), entries and models added, and the keys whose
declaration says they do not change a measurement (`opt(measures=False)`: timeouts, where results are copied, the
cluster's machines). A key newer than the folder, left at its default, was measured the same way.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from backends.registry import BACKENDS
from harness.config.kinds import show
from harness.config.sweep import SweepConfig, SweepYaml, entry_key, to_plain
from harness.errors import UserError

# The axes: changing them adds (or leaves out) points; the points already measured stay what they were.
AXES = ("batch_sizes", "input_lengths", "output_lengths", "max_batch_size", "stream.request_rates",
        "stream.max_concurrency")
# Compared on their own terms below: entries by label (each with its engine's options), models by their sections.
BY_ITEM = ("backends", "models")
_ABSENT = object()  # a key the folder's config does not hold at all


def check_resumable(previous: dict, config: SweepConfig, path: Path) -> None:
    """Refuse to mix rows measured under another setting into one folder, naming the key and both values."""
    if not previous:
        return
    before, now = previous["config"], to_plain(config)
    for key, kind in (("backends", list), ("model", dict), ("models", list), ("stream", dict)):
        if before.get(key) is not None and not isinstance(before[key], kind):
            raise UserError(f"--resume: {path}/manifest.json is damaged (its config's {key} is not a {kind.__name__}), "
                            "so what its rows were measured with is unknown; use a new --output-dir")
    changed = next(_changes(SweepYaml, before, now, ""), None) or _entry_change(before, now, config)
    if changed is not None:
        key, old, new = changed
        shown = "absent" if old is _ABSENT else show(old)
        raise UserError(f"--resume: {path} was measured with {key}={shown}, this config has {show(new)}; use a new "
                        "--output-dir")
    old_models, new_models = before.get("models"), now.get("models")
    if old_models != new_models and not (old_models and new_models and all(m in new_models for m in old_models)):
        raise UserError(f"--resume: {path} was measured with models={old_models!r}; this config changes or removes "
                        f"one of them ({new_models!r}): models may be added on resume, never changed; else use a new "
                        "--output-dir")


def _changes(schema: type, before: Any, now: Dict[str, Any], prefix: str) -> Iterator[Tuple[str, Any, Any]]:
    """(key, folder's value, this config's) for each measured key of the section `schema` that differs."""
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        key = f"{prefix}{f.name}"
        if key in AXES or key in BY_ITEM or f.metadata.get("measures") is False or f.name not in now:
            continue
        old = before.get(f.name, _ABSENT) if isinstance(before, dict) else _ABSENT
        new = now[f.name]
        nested = _section(hints[f.name])
        if nested is not None and isinstance(new, dict) and isinstance(old, dict):
            yield from _changes(nested, old, new, f"{key}.")
        elif old is _ABSENT:
            if new != _plain_default(f):
                yield key, old, new
        elif old != new:
            yield key, old, new


def _entry_change(before: Dict[str, Any], now: Dict[str, Any],
                  config: SweepConfig) -> Optional[Tuple[str, Any, Any]]:
    """The first option of an entry that the folder measured under the same label, changed."""
    measured = {_label(e): e for e in before.get("backends") or [] if isinstance(e, dict)}
    for i, entry in enumerate(now["backends"]):
        old = measured.get(_label(entry))
        if old is None:
            continue  # a new entry: its points are simply run
        options = BACKENDS.get(entry["name"], entry_key(config, i)).Options
        changed = next(_changes(options, old, entry, f"{entry_key(config, i)}."), None)
        if changed is not None:
            return changed
    return None


def _label(entry: Dict[str, Any]) -> str:
    return entry.get("label") or entry.get("name") or ""


def _section(hint: Any) -> Optional[type]:
    """The config section a field holds (its type, or X of Optional[X], when a dataclass)."""
    kinds: List[Any] = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    return next((k for k in kinds if isinstance(k, type) and dataclasses.is_dataclass(k)), None)


def _plain_default(f: dataclasses.Field) -> Any:
    """A field's default as `to_plain` writes it: a section as its mapping."""
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value

"""A backend entry's `grid`: option -> list of values, expanded at load into one entry per combination (their
cartesian product, the last option varying fastest), as a `speculative` list or `model.quantization` list is.

Each combination is an ordinary entry: its options set as if written by hand, its label the entry's with the values
that vary (`vllm[max_num_seqs=64,enable_chunked_prefill=false]`), and those values kept in `grid_values` (the
`grid_options` column of results.csv). An option may be nested (`engine_args.block_size`). Each value is checked
here by the backend's typed options, its error naming the grid key; `_typed` then parses every combination. Entries
expanded from one keep its YAML key (`EntryKeys`).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import typing
from typing import Any, Dict, List, Tuple

from harness.errors import UserError, did_you_mean

if typing.TYPE_CHECKING:
    from harness.config.registry import Registry

# More entries than this from one grid needs --yes: a typo of a list is a long sweep.
MAX_GRID_ENTRIES = 64
# Keys every entry shares that a grid may not vary: each has its own list, or names the entry.
NOT_GRIDDED = ("name", "label", "speculative", "quantization", "grid", "grid_values")

Expanded = Tuple[str, str, Any]  # (YAML key of the entry, of its speculative section, raw entry)


def expand_grids(entries: List[Expanded], backends: "Registry", allow_large: bool = False) -> List[Expanded]:
    """Each entry with a non-empty `grid` replaced by one entry per combination of its values, in order."""
    out: List[Expanded] = []
    for key, spec_key, entry in entries:
        grid = entry.get("grid") if isinstance(entry, dict) else None
        if grid is None or grid == {}:
            out.append((key, spec_key, entry))
            continue
        lists = _checked(entry, key, backends, allow_large)
        out.extend((key, spec_key, combo) for combo in combinations(entry, lists))
    return out


def combinations(entry: Dict[str, Any], lists: Dict[str, List[Any]]) -> List[Dict[str, Any]]:
    """The raw entries of the grid `lists` (checked) over `entry`: values set, label and grid_values given."""
    varying = [k for k, values in lists.items() if len(values) > 1]
    base_label = entry.get("label") or entry.get("name")
    out = []
    for values in itertools.product(*lists.values()):
        combo = copy.deepcopy({k: v for k, v in entry.items() if k != "grid"})
        chosen = dict(zip(lists, values))
        for path, value in chosen.items():
            _set(combo, path, value)
        combo["grid_values"] = {k: chosen[k] for k in varying}
        if varying:
            combo["label"] = f"{base_label}[{','.join(f'{k}={show(chosen[k])}' for k in varying)}]"
        out.append(combo)
    return out


def show(value: Any) -> str:
    """A value as YAML writes it: `false`, `null`, `64`, `fp8`."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def grid_cell(values: Dict[str, Any]) -> str:
    """The `grid_options` column: `max_num_seqs=64;enable_chunked_prefill=false`, empty without a grid."""
    return ";".join(f"{k}={show(v)}" for k, v in values.items())


def _checked(entry: Dict[str, Any], key: str, backends: "Registry", allow_large: bool) -> Dict[str, List[Any]]:
    """The grid's lists, each key and value checked; a UserError naming `key`.grid.<option> otherwise."""
    if not isinstance(entry["grid"], dict):
        raise UserError(f"{key}.grid: expected a mapping of option -> list of values, got {_kind(entry['grid'])}")
    grid = _flat(entry["grid"])
    if entry.get("grid_values"):
        raise UserError(f"{key}.grid_values: set from grid, one entry per combination; remove it")
    options = backends.class_of(entry, key).Options
    fields = [f.name for f in dataclasses.fields(options) if f.name not in NOT_GRIDDED]
    hints = typing.get_type_hints(options)
    mappings = [name for name in fields if typing.get_origin(hints[name]) is dict or _section(hints[name])]
    for path, values in grid.items():
        where = f"{key}.grid.{path}"
        top = path.split(".")[0]
        if not all(path.split(".")):
            raise UserError(f"{where}: a key with an empty part; name an option, or a key inside a mapping option "
                            "as engine_args.block_size")
        if "." in path and top not in mappings:
            raise UserError(f"{where}: {top} is not a mapping option, so it has no key {path.split('.', 1)[1]!r} "
                            f"(mapping options: {', '.join(mappings) or 'none'})")
        if "." in path and entry.get(top) is not None and not isinstance(entry[top], dict):
            raise UserError(f"{key}.{top}: expected a mapping of keys, got {entry[top]!r}")
        if top in NOT_GRIDDED:
            raise UserError(f"{where}: not gridded (speculative and model.quantization take lists of their own; name "
                            "and label name the entry)")
        if top not in fields:
            raise UserError(f"{where}: not an option of backend {entry.get('name')} (options: {', '.join(fields)})"
                            f"{did_you_mean(top, fields)}")
        if not isinstance(values, list):
            raise UserError(f"{where}: expected a list of values, got {_kind(values)}")
        if not values:
            raise UserError(f"{where}: an empty list; give the values to run, e.g. [1, 2]")
        if any(values.count(v) > 1 for v in values):
            raise UserError(f"{where}: has duplicates: {values}")
        if _has(entry, path):
            raise UserError(f"{where}: also set directly as {key}.{path}; give it in one place")
    size = math.prod(len(v) for v in grid.values())
    if size > MAX_GRID_ENTRIES and not allow_large:
        sizes = " x ".join(str(len(v)) for v in grid.values())
        raise UserError(f"{key}.grid: {sizes} = {size} entries, more than {MAX_GRID_ENTRIES}; pass --yes to run "
                        "them all")
    for path, values in grid.items():
        for value in values:
            _check_value(entry, key, backends, {**{p: v[0] for p, v in grid.items()}, path: value})
    return grid


def _section(hint: Any) -> bool:
    """Whether an option is a section of keys of its own (`lora`), Optional or not: a grid may vary its keys."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is typing.Union \
        else [hint]
    return len(args) == 1 and dataclasses.is_dataclass(args[0])


def _flat(grid: Dict[Any, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested mappings as dotted keys: `{engine_args: {block_size: [16]}}` (what an override such as
    `backends.0.grid.engine_args.block_size=[16]` makes) is `{engine_args.block_size: [16]}`."""
    out: Dict[str, Any] = {}
    for k, v in grid.items():
        path = f"{prefix}{k}"
        out.update(_flat(v, f"{path}.") if isinstance(v, dict) else {path: v})
    return out


def _check_value(entry: Dict[str, Any], key: str, backends: "Registry", chosen: Dict[str, Any]) -> None:
    """The entry with one value of the grid checked (the other grid options at their first value, so that options
    that must go together, such as a command's placeholders and server_args, are all set), through the backend's
    typed options and its checks; an error about a grid option is said of its grid key."""
    single = copy.deepcopy({k: v for k, v in entry.items() if k != "grid"})
    for path, value in chosen.items():
        _set(single, path, value)
    try:
        backends.options(single, key).validate(key)
    except UserError as e:
        message = str(e)
        for path in chosen:
            if message.startswith((f"{key}.{path}:", f"{key}.{path}.")):
                raise UserError(f"{key}.grid.{message[len(key) + 1:]}") from None
        raise


def _set(entry: Dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = entry
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _has(entry: Dict[str, Any], path: str) -> bool:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"

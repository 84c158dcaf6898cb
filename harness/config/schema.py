"""`python benchmark.py --schema [SECTION]`: every config key with its type, default and help text.

Generated from the typed config itself (harness/config/sweep.py, harness/config/stream/section.py, each backend's and
workload's
`Options`), so what it prints cannot drift from what a YAML is checked against; tests/test_schema.py holds the
backend-option table of docs/guides/engines.md to it.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from harness.config.registry import Registry
from harness.errors import UserError, known_names
from harness.markdown import cell

TOP = "sweep"  # the section of the YAML's top-level keys


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    default: str
    help: str


def sections(backends: Registry, workloads: Registry) -> Dict[str, Tuple[type, str]]:
    """Section name -> (its dataclass, what it is), in the order a reader meets them: the top level, its nested
    sections, then each backend's entry (`backends.NAME`) and each workload's (`workload.NAME`)."""
    from harness.config.sweep import SweepYaml

    found: Dict[str, Tuple[type, str]] = {}
    _collect(SweepYaml, TOP, "the YAML's top-level keys", "", found)
    options = {name: backends.get(name, "backends").Options for name in backends.names()}
    for name, cls in options.items():
        found[f"backends.{name}"] = (cls, f"a `backends` entry with name: {name}")
    for cls in options.values():  # sections every entry shares (speculative): once, named by their key alone
        _collect_nested(cls, "", found)
    for name in workloads.names():
        cls = workloads.get(name, "workload")
        _collect(cls.Options, f"workload.{name}", f"the `workload` section of a {name} workload", "workload.", found)
    return found


def keys(cls: type) -> List[Key]:
    hints = typing.get_type_hints(cls)
    return [Key(f.name, _type_name(hints[f.name]) + _range(f), _default(f), f.metadata.get("help", ""))
            for f in dataclasses.fields(cls)]


def _range(f: dataclasses.Field) -> str:
    """` (seconds > 0)`, ` (in (0, 1])`: a number's declared range and unit, as harness/config/kinds.py checks it."""
    limits = f.metadata.get("range")
    if limits is None:
        return ""
    words = limits.words(integer=False).replace("a finite number", "").replace("a finite percentage", "%")
    return f" ({words.strip().removeprefix('of ')})"


def select(all_sections: Dict[str, Tuple[type, str]], wanted: str) -> Dict[str, Tuple[type, str]]:
    """The sections named `wanted` or nested under it (`backends` gives every backend's); all for ""."""
    chosen = {name: s for name, s in all_sections.items()
              if not wanted or name == wanted or name.startswith(wanted + ".")}
    if not chosen:
        raise UserError(f"--schema: no section {wanted!r}{known_names(wanted, list(all_sections))}")
    return chosen


def render(chosen: Dict[str, Tuple[type, str]]) -> str:
    blocks = []
    for name, (cls, what) in chosen.items():
        rows = keys(cls)
        width = [max(len(getattr(k, column)) for k in rows) for column in ("name", "type", "default")]
        lines = [f"[{name}]  {what}"]
        for k in rows:
            lines.append(f"  {k.name:<{width[0]}}  {k.type:<{width[1]}}  {k.default:<{width[2]}}  {k.help}".rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_markdown(chosen: Dict[str, Tuple[type, str]]) -> str:
    """The same keys as `render`, as docs/reference/config.md's sections: a heading and a table per section."""
    blocks = []
    for name, (cls, what) in chosen.items():
        sentence = cell(what[:1].upper() + what[1:]) + ("" if what.endswith(".") else ".")
        lines = [f"## {name}", "", sentence, "",
                 "| key | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k.name}` | {cell(k.type)} | `{cell(k.default)}` | {cell(k.help)} |" for k in keys(cls)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _collect(cls: type, name: str, what: str, prefix: str, found: Dict[str, Tuple[type, str]]) -> None:
    """`cls` as section `name`, then the sections nested in it as `prefix` + their key."""
    found[name] = (cls, what)
    _collect_nested(cls, prefix, found)


def _collect_nested(cls: type, prefix: str, found: Dict[str, Tuple[type, str]]) -> None:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        nested = _dataclass_in(hints[f.name])
        if nested is not None and nested not in (c for c, _ in found.values()):  # each class once
            key = prefix + f.name
            _collect(nested, key, f.metadata.get("help", ""), key + ".", found)


def _dataclass_in(t: Any) -> Optional[type]:
    """The config section a field holds: its type, or the X of Optional[X], when that is a dataclass."""
    candidates = [a for a in typing.get_args(t) if a is not type(None)] if typing.get_origin(t) is typing.Union \
        else [t]
    return next((c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)), None)


def _type_name(t: Any) -> str:
    if t is Any:
        return "any"
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Union:
        names = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(names) + (" | null" if type(None) in args else "")
    if origin in (list, List):
        return f"list[{_type_name(args[0])}]" if args else "list"
    if origin in (dict, Dict):
        return f"map[{_type_name(args[0])}, {_type_name(args[1])}]" if args else "map"
    if dataclasses.is_dataclass(t):
        return "section"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(t, getattr(t, "__name__", str(t)))


def _default(f: dataclasses.Field) -> str:
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return "(section)" if dataclasses.is_dataclass(value) else json.dumps(value)
    if f.default is dataclasses.MISSING or f.default == "???":  # OmegaConf's MISSING: a required key
        return "required"
    return json.dumps(f.default)

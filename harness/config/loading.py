"""YAML -> typed dataclasses: read a mapping, apply `key=value` overrides, merge it into a structured schema.

Every failure is one `UserError` naming the key path; OmegaConf's wording is rephrased as `expected <type>, got
<value>`. The sweep config built on this is harness/config/sweep.py's.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from harness.config.kinds import check_section
from harness.errors import UserError, did_you_mean
from harness.files import read_utf8


def to_dataclass(schema: type, raw: Any, prefix: str = "") -> Any:
    """Merge `raw` into the structured schema and return a dataclass instance, or raise UserError."""
    check_section(schema, raw, prefix)  # every key's kind and range first: OmegaConf's errors carry no key path
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(raw))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:
        raise _translate(e, schema, prefix) from None
    except (TypeError, ValueError) as e:  # OmegaConf's own, for a value the pass above let through
        raise UserError(f"{prefix or 'config'}: {_first_line(e)}") from None


def read_yaml_mapping(path: Path, kind: str = "config", contents: str = "keys at the top level") -> dict:
    """A YAML file that must hold a mapping; every failure is one UserError line naming the file."""
    data = load_yaml(read_utf8(path, kind), str(path))
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of {contents}, got {_show(data)}")
    return data


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: PyYAML keeps the last one
    silently, so `batch_sizes:` written twice would run the second list without a word."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden here
            continue
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        line = key_node.start_mark.line + 1
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (lines {seen[key]} and {line}): give each key once",
                key_node.start_mark)
        seen.setdefault(key, line)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def load_yaml(text: str, where: str) -> Any:
    """YAML text as data (PyYAML's safe subset, duplicate keys refused); UserError naming `where` and the line."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506: a SafeLoader subclass
    except yaml.YAMLError as e:
        raise UserError(f"{where}: not valid YAML{yaml_reason(e)}") from None


def yaml_reason(e: yaml.YAMLError) -> str:
    """` at line 4, column 9: mapping values are not allowed here (while parsing a block mapping from line 2)`:
    where the parser stopped and its own reason, for a one-line error."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None)
    context, start = getattr(e, "context", None), getattr(e, "context_mark", None)
    since = f" ({context} from line {start.line + 1})" if context and start else ""
    return f"{where}: {problem}{since}" if problem else where


def apply_override(raw: dict, item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise UserError(f"override {item!r}: expected key=value, e.g. batch_sizes=[1,8]")
    try:
        value = yaml.load(text, Loader=_StrictLoader) if text else ""  # noqa: S506: a SafeLoader subclass
    except yaml.YAMLError as e:
        raise UserError(f"override {key}: cannot parse value {text!r}{yaml_reason(e)}") from None
    conf = OmegaConf.create(raw)
    try:
        OmegaConf.update(conf, key, value, merge=False)
    except OmegaConfBaseException as e:
        raise UserError(f"override {key}: {_first_line(e)}") from None
    container = OmegaConf.to_container(conf)
    assert isinstance(container, dict)  # conf was created from the dict `raw`, so it converts back to one
    raw.clear()
    raw.update(container)


def _translate(e: OmegaConfBaseException, schema: type, prefix: str) -> UserError:
    key = _join(prefix, str(e.full_key or "")) or "config"
    if isinstance(e, ConfigKeyError):
        owner = e.object_type if dataclasses.is_dataclass(e.object_type) else schema
        allowed = [f.name for f in dataclasses.fields(owner)]
        hint = did_you_mean(key.rsplit(".", 1)[-1], allowed)
        return UserError(f"{key}: unknown key (allowed: {', '.join(allowed)}){hint}")
    if isinstance(e, MissingMandatoryValue):
        return UserError(f"{key}: required, not set")
    return UserError(f"{key}: {_type_message(e)}")


def _type_message(e: OmegaConfBaseException) -> str:
    """OmegaConf's wording, rephrased as `expected <type>, got <value>`."""
    msg = _first_line(e)
    converted = re.search(r"could not be converted to (\w+)", msg)
    if converted:
        expected = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false",
                    "String": "a string"}.get(converted.group(1), converted.group(1))
        return f"expected {expected}, got {e.value!r}"
    if "is not a valid bool" in msg:
        return f"expected true or false, got {e.value!r}"
    if "is not a ListConfig" in msg:
        return f"expected a list, got {e.value!r}"
    return msg


def _join(prefix: str, key: str) -> str:
    return ".".join(p for p in (prefix, key) if p)


def _first_line(e: Exception) -> str:
    msg = getattr(e, "msg", None) or str(e)
    return msg.strip().splitlines()[0]


def _show(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"

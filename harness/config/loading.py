"""YAML -> typed dataclasses: read a mapping, apply `key=value` overrides, merge it into a structured schema.

Every failure is one `UserError` naming the key path; OmegaConf's wording is rephrased as `expected <type>, got
<value>`. The sweep config built on this is harness/config/sweep.py's.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from harness.config.kinds import check_section
from harness.errors import UserError, did_you_mean
from harness.config.yaml_text import load_yaml, parse, yaml_reason
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


def apply_override(raw: dict, item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise UserError(f"override {item!r}: expected key=value, e.g. batch_sizes=[1,8]")
    try:
        value = parse(text) if text else ""
    except yaml.YAMLError as e:
        raise UserError(f"override {key}: cannot parse value {text!r}{yaml_reason(e)}") from None
    _check_path(raw, key)
    conf = OmegaConf.create(raw)
    try:
        OmegaConf.update(conf, key, value, merge=False)
    except (OmegaConfBaseException, TypeError, ValueError, IndexError) as e:
        raise UserError(f"override {key}: {_first_line(e)}") from None
    container = OmegaConf.to_container(conf)
    assert isinstance(container, dict)  # conf was created from the dict `raw`, so it converts back to one
    raw.clear()
    raw.update(container)


def _check_path(raw: dict, key: str) -> None:
    """A dotted override key whose parts exist as far as the YAML goes: a list is indexed by a number within it."""
    node: Any = raw
    parts = key.split(".")
    for i, part in enumerate(parts):
        where = ".".join(parts[:i]) or "config"
        if not part:
            raise UserError(f"override {key}: a key with an empty part")
        if isinstance(node, list):
            if not part.isdigit():
                raise UserError(f"override {key}: {where} is a list; index it by number, e.g. {where}.0")
            if int(part) >= len(node):
                raise UserError(f"override {key}: {where} has {len(node)} item(s), numbered 0 to {len(node) - 1}")
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return  # a key the YAML does not give yet: the override adds it (and the checks then read it)


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

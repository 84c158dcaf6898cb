"""The one checking pass over a raw config section, before anything is built from it: every key against its field's
declared kind, with the key's full path in the one-line error.

What each field is comes from its declaration alone (its type hint and `opt`'s range, harness/fields.py): a mapping
(a nested section, or `Dict`), a list (and each item's kind), a strict bool (`true`/`false`, never 2 or "yes"), an
integer of at most 64 bits, a finite number (NaN never; infinity only where the range allows it) within its range
and unit, a string (text only, not empty unless its default is, no control character). So a new key is checked by
being declared. `Any` fields are read by their section's own code (a list or `auto`, an engine's options picked by
name), which checks them; here only what no key means is refused inside them (NaN, an integer past 64 bits), and a
mapping where the default is a list (or the reverse). Cross-field checks stay with their sections
(harness/config/sweep.py's `validate`).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Dict, List, Optional

from harness.errors import UserError, did_you_mean
from harness.fields import ANY_NUMBER, Range, is_int, is_number

INT_LIMIT = 2**63


def check_section(schema: type, raw: Any, path: str) -> None:
    """`raw` (a YAML mapping) against the dataclass `schema`: unknown keys, kinds, ranges; UserError at the first
    problem, named by its full key path (`stream.stages[0].duration_s`)."""
    if not isinstance(raw, dict):
        raise UserError(f"{path or 'config'}: expected a mapping of keys, got {show(raw)}")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for key, value in raw.items():
        where = join(path, str(key))
        if key not in fields:
            allowed = list(fields)
            raise UserError(f"{where}: unknown key (allowed: {', '.join(allowed)}){did_you_mean(str(key), allowed)}")
        if hints[key] is Any and isinstance(_default(fields[key]), dict) and not isinstance(value, dict):
            # an Any key whose default is a mapping (`workload`) is read as a section by its own code
            raise UserError(f"{where}: expected a mapping of keys, got {show(value)}")
        if hints[key] is Any and isinstance(_default(fields[key]), list) and isinstance(value, dict):
            # one whose default is a list (`stream.request_rates`) takes a list or one value, never a mapping
            raise UserError(f"{where}: expected a list or one value, got {show(value)}")
        if isinstance(value, str) and not value.strip() and _default(fields[key]) != "":
            # an empty path would be the YAML's own folder, an empty name no name: never what was meant
            raise UserError(f"{where}: must not be empty; leave it out for its default")
        check_value(hints[key], value, where, fields[key].metadata.get("range"))


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def check_value(hint: Any, value: Any, where: str, limits: Optional[Range] = None) -> None:
    """One value against its declared type (and, for a number, its range)."""
    if hint is Any:
        _sane(value, where)
        return
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        if value is None and type(None) in args:
            return
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) == 1:
            check_value(kinds[0], value, where, limits)
            return
        _sane(value, where)  # a union of several kinds is read by its section's own code
        return
    if value is None:
        raise UserError(f"{where}: required, got null (expected {_expected(hint)})")
    if dataclasses.is_dataclass(hint):
        check_section(typing.cast(type, hint), value, where)
    elif origin in (list, List):
        if not isinstance(value, list):
            raise UserError(f"{where}: expected a list, got {show(value)}")
        for i, item in enumerate(value):
            check_value(args[0] if args else Any, item, f"{where}[{i}]")
    elif origin in (dict, Dict):
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected a mapping, got {show(value)}")
        for key, item in value.items():
            if (args and args[0] is str) and (not isinstance(key, str) or not key):
                raise UserError(f"{where}: keys must be non-empty names, got {show(key)}")
            check_value(args[1] if len(args) == 2 else Any, item, join(where, key))
    else:
        _scalar(hint, value, where, limits)


def _scalar(hint: Any, value: Any, where: str, limits: Optional[Range]) -> None:
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where}: expected true or false, got {show(value)}")
    elif hint is int:
        if not is_int(value):
            raise UserError(f"{where}: expected an integer, got {show(value)}")
        _sane(value, where)
        if limits is not None and not limits.holds(value):
            raise UserError(f"{where}: must be {limits.words(integer=True)}, got {show(value)}")
    elif hint is float:
        if not is_number(value):
            raise UserError(f"{where}: expected a number, got {show(value)}")
        limits = limits or ANY_NUMBER  # NaN holds no range
        if not limits.holds(value):
            raise UserError(f"{where}: must be {limits.words(integer=False)}, got {show(value)}")
    elif hint is str:
        if not isinstance(value, str):  # `label: 7` is a number in YAML: quoted, '7', it is the text
            quote = f" (quote it: '{value}')" if is_number(value) else ""
            raise UserError(f"{where}: expected a string, got {show(value)}{quote}")
        _sane(value, where)
        if isinstance(value, str) and any(_unreadable(ch) for ch in value):
            raise UserError(f"{where}: holds a control character or bytes that are not UTF-8, got {show(value)}")


def _unreadable(ch: str) -> bool:
    """A control character (a line end or a tab aside), or a byte that was not UTF-8 on the command line (Python
    keeps such bytes as lone surrogates)."""
    return (ord(ch) < 32 and ch not in "\n\r\t") or ch == "\x7f" or "\ud800" <= ch <= "\udfff"


def _sane(value: Any, where: str) -> None:
    """No key of the config means NaN, or an integer wider than the 64 bits engines, numpy and torch hold: refused
    wherever it is, inside lists and mappings too."""
    if isinstance(value, float) and math.isnan(value):
        raise UserError(f"{where}: must be a finite number, got nan")
    if is_int(value) and not -INT_LIMIT < value < INT_LIMIT:
        raise UserError(f"{where}: must be an integer of at most 19 digits, got {show(value)}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            _sane(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _sane(item, join(where, str(key)))


def _expected(hint: Any) -> str:
    if dataclasses.is_dataclass(hint):
        return "a mapping of keys"
    origin = typing.get_origin(hint)
    return {list: "a list", dict: "a mapping"}.get(origin, {bool: "true or false", int: "an integer",
                                                             float: "a number", str: "a string"}.get(hint, "a value"))


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def show(value: Any, width: int = 60) -> str:
    """A value as a message quotes it: `null`, `true`, `'two'`, `2.5`, `inf`, `a mapping {'a': 16}`, `a list [1, 2]`
    (shortened past `width` characters)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if is_int(value) and abs(value) >= 10**12:
        return f"{value:.3g}"  # 1e+30, not thirty digits
    text = repr(value)
    if len(text) > width:
        text = text[:width - 3] + "..."
    if isinstance(value, dict):
        return f"a mapping {text}"
    if isinstance(value, list):
        return f"a list {text}"
    return text

"""Answers held to a JSON Schema (`workload.json_schema`): the schema read and checked once, as the sweep is
loaded, and each answer checked against it as it arrives (docs/measurement.md, "Structured output").

An answer is valid when its whole text parses as one JSON value and that value meets the schema. Nothing is
repaired first: no code fence stripped, no trailing text dropped, since a client that needs the answer as JSON
would fail on those too. An answer cut at its output budget is invalid, like any other that does not parse.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.files import read_utf8

KEY = "workload.json_schema"


def load_answer_schema(path: Path) -> str:
    """The schema at `path` as canonical JSON text (what a BatchSpec carries); UserError naming the file and what is
    wrong: unreadable, not JSON (with its line), not an object, or not a valid JSON Schema."""
    schema = read_json(path, KEY, "a JSON Schema")
    if not isinstance(schema, dict):
        raise UserError(f"{KEY}: {path}: a JSON Schema is an object, got {type(schema).__name__}")
    check_schema(schema, f"{KEY}: {path}: not")
    return canonical(schema)


def read_json(path: Path, key: str, kind: str) -> Any:
    """A small JSON file a workload key names, parsed; UserError naming the key, the file and, where it does not
    parse, the line."""
    try:
        text = read_utf8(Path(path), kind)
    except UserError as e:
        raise UserError(f"{key}: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{key}: {path} line {e.lineno}: not JSON ({e.msg})") from None


def check_schema(schema: Any, said: str) -> None:
    """UserError `{said} a valid JSON Schema at WHERE (why)` unless `schema` is one (draft 2020-12)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.path) or "the top level"
        raise UserError(f"{said} a valid JSON Schema at {where} ({' '.join(e.message.split())[:200]})") from None


def canonical(value: Any) -> str:
    """JSON text that is the same for the same value, however the file spaced or ordered it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=8)
def _validator(schema_text: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema_text))


def answer_valid(schema_text: str, answer: str) -> bool:
    """Whether `answer` is one JSON value that meets the schema (`schema_text`, as load_answer_schema returns it)."""
    try:
        value = json.loads(answer)
    except ValueError:
        return False
    return _validator(schema_text).is_valid(value)

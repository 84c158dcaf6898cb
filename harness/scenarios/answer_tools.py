"""Answers that are tool calls (`workload.tools`): the tools read and checked once, as the sweep is loaded, and each
answer's calls checked against them as it arrives (docs/measurement.md, "Tool calls").

The file is a JSON list of tools in the Chat Completions API's shape, the one most tool sets are written in:
`{"type": "function", "function": {"name": ..., "description": ..., "parameters": <JSON Schema>}}`. The client
sends them in each API's own shape (backends/openai_compat/client.py).

An answer is valid when it holds at least one call and every call names one of the tools and its arguments parse as
one JSON object that meets that tool's `parameters`. Nothing is repaired first, as with a JSON schema: an agent that
runs the call would fail on the same answers. A text answer with no call is invalid: the workload asks for calls.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

from harness.errors import UserError
from harness.scenarios.answer_schema import canonical, check_schema, read_json

KEY = "workload.tools"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for a function's name; Anthropic's is the same
EMPTY_PARAMETERS = {"type": "object", "properties": {}}  # a tool without parameters is called with {}


def load_tools(path: Path) -> str:
    """The tools at `path` as canonical JSON text (what a BatchSpec carries); UserError naming the file, the tool
    and what is wrong: unreadable, not JSON (with its line), not a non-empty list, a tool not of the Chat
    Completions shape, a name OpenAI's API refuses or used twice, parameters that are not a valid JSON Schema for
    an object."""
    tools = read_json(path, KEY, "a tools file")
    if not isinstance(tools, list) or not tools:
        raise UserError(f"{KEY}: {path}: a tools file is a non-empty JSON list of tools, got "
                        f"{'an empty list' if tools == [] else type(tools).__name__}")
    names = set()
    for i, tool in enumerate(tools):
        where = f"{KEY}: {path}: tool {i}"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise UserError(f"{where}: must be {{\"type\": \"function\", \"function\": {{\"name\": ..., "
                            "\"parameters\": ...}} (the Chat Completions API's shape)")
        function = tool["function"]
        name = function.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise UserError(f"{where}: function.name must be 1-64 letters, digits, '_' or '-', got {name!r}")
        if name in names:
            raise UserError(f"{where}: function.name {name!r} is used by an earlier tool; names must be unique")
        names.add(name)
        if not isinstance(function.get("description", ""), str):
            raise UserError(f"{where} ({name}): function.description must be text")
        parameters = function.get("parameters", EMPTY_PARAMETERS)
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise UserError(f"{where} ({name}): function.parameters must be a JSON Schema of an object "
                            "(\"type\": \"object\")")
        check_schema(parameters, f"{where} ({name}): function.parameters is not")
    return canonical(tools)


@lru_cache(maxsize=8)
def _validators(tools_text: str) -> Dict[str, Any]:
    from jsonschema import Draft202012Validator

    return {tool["function"]["name"]: Draft202012Validator(tool["function"].get("parameters", EMPTY_PARAMETERS))
            for tool in json.loads(tools_text)}


def calls_valid(tools_text: str, calls: Sequence[Tuple[str, str]]) -> bool:
    """Whether an answer's calls, (name, arguments as streamed) each, are at least one and each a call of a listed
    tool with arguments that meet its parameters (`tools_text` as load_tools returns it)."""
    validators = _validators(tools_text)
    if not calls:
        return False
    for name, arguments in calls:
        try:
            value = json.loads(arguments or "{}")  # a call of a tool without parameters may stream no arguments
        except ValueError:
            return False
        if name not in validators or not isinstance(value, dict) or not validators[name].is_valid(value):
            return False
    return True


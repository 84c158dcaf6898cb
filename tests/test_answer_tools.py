"""workload.tools (harness/scenarios/answer_tools.py): the tools file read once, every fault one line naming the file
and the tool; each answer's calls held to the tools' parameters. How each API streams its calls:
tests/test_openai_events.py; the requests through a server: tests/test_openai_server.py."""

import pytest

from harness.errors import UserError
from harness.scenarios.answer_tools import calls_valid, load_tools
from tests.conftest import REPO

WEATHER = REPO / "yamls" / "tools" / "weather.json"


@pytest.mark.parametrize("calls, valid", [
    ([("get_weather", '{"city":"Paris","days":3,"metric":false}')], True),
    ([("get_time", ' {"city": "Oslo"}\n')], True),
    ([("get_time", '{"city":"Oslo"}'), ("get_weather", '{"city":"Rome","days":1,"metric":true}')], True),
    ([], False),  # a text answer: no call
    ([("get_date", '{"city":"Oslo"}')], False),  # not a listed tool
    ([("get_time", '{"city":"Lima"}')], False),  # parses, fails the tool's parameters
    ([("get_time", '{"city":"Oslo","tz":1}')], False),  # additionalProperties: false
    ([("get_weather", '{"city":"Paris","days":3,"met')], False),  # cut at its budget
    ([("get_time", '["Oslo"]')], False),  # arguments are an object
    ([("get_time", '{"city":"Oslo"}'), ("get_time", "")], False),  # every call counts: {} lacks the city
])
def test_an_answer_is_valid_when_every_call_meets_its_tools_parameters(calls, valid):
    assert calls_valid(load_tools(WEATHER), calls) is valid


def test_a_tool_without_parameters_is_called_with_an_empty_object(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('[{"type": "function", "function": {"name": "now"}}]')
    tools = load_tools(path)
    assert calls_valid(tools, [("now", "")]) and calls_valid(tools, [("now", "{}")])
    assert not calls_valid(tools, [("now", "[]")])


def test_the_tools_are_carried_as_canonical_json(tmp_path):
    spaced = tmp_path / "spaced.json"
    spaced.write_text('[ {"function": {"name": "now"} ,\n "type": "function"} ]')
    assert load_tools(spaced) == '[{"function":{"name":"now"},"type":"function"}]'


@pytest.mark.parametrize("text, message", [
    ('[{"type": "function",\n "function": }]', r"line 2: not JSON \(Expecting value\)"),
    ('{"type": "function"}', "a tools file is a non-empty JSON list of tools, got dict"),
    ("[]", "a tools file is a non-empty JSON list of tools, got an empty list"),
    ('[{"name": "now"}]', r'tool 0: must be \{"type": "function", "function": \{"name": \.\.\., "parameters"'),
    ('[{"type": "function", "function": {"name": "get weather"}}]',
     r"tool 0: function.name must be 1-64 letters, digits, '_' or '-', got 'get weather'"),
    ('[{"type": "function", "function": {"name": 5}}]', "tool 0: function.name must be .* got 5"),
    ('[{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]',
     "tool 1: function.name 'a' is used by an earlier tool; names must be unique"),
    ('[{"type": "function", "function": {"name": "a", "description": 1}}]',
     r"tool 0 \(a\): function.description must be text"),
    ('[{"type": "function", "function": {"name": "a", "parameters": {"type": "string"}}}]',
     r"tool 0 \(a\): function.parameters must be a JSON Schema of an object"),
    ('[{"type": "function", "function": {"name": "a", "parameters": {"properties": {"x": {"minimum": "0"}}}}}]',
     r"tool 0 \(a\): function.parameters is not a valid JSON Schema at properties/x/minimum"),
])
def test_a_bad_tools_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "tools.json"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"^workload\.tools: {path}:? .*{message}") as failure:
        load_tools(path)
    assert "\n" not in str(failure.value)


def test_a_missing_tools_file_is_named(tmp_path):
    with pytest.raises(UserError, match=r"^workload\.tools: .*no-such\.json: cannot read a tools file"):
        load_tools(tmp_path / "no-such.json")

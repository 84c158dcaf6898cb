"""workload.json_schema (harness/scenarios/answer_schema.py): the schema file read once, every fault one line naming
the file; each answer held to it as a client reading JSON would hold it. The requests through a server:
tests/test_openai_server.py."""

import pytest

from harness.errors import UserError
from harness.scenarios.answer_schema import answer_valid, load_answer_schema
from tests.conftest import REPO

YES_NO = REPO / "yamls" / "schemas" / "yes-no.json"


@pytest.mark.parametrize("answer, valid", [
    ('{"answer": "yes", "sure": true}', True),
    (' {"sure": false, "answer": "no"}\n', True),  # whitespace around one JSON value is still that value
    ('{"answer": "maybe", "sure": true}', False),  # parses, fails the schema
    ('{"answer": "yes"}', False),  # a required key missing
    ('{"answer": "yes", "sure": true, "why": 1}', False),  # additionalProperties: false
    ('{"answer": "yes", "sure": tr', False),  # cut at its budget
    ('```json\n{"answer": "yes", "sure": true}\n```', False),  # fenced: a JSON reader fails on it, so does this
    ('{"answer": "yes", "sure": true} Hope that helps', False),
    ("", False),
])
def test_an_answer_is_valid_only_as_one_json_value_meeting_the_schema(answer, valid):
    assert answer_valid(load_answer_schema(YES_NO), answer) is valid


def test_the_schema_is_carried_as_canonical_json(tmp_path):
    spaced = tmp_path / "spaced.json"
    spaced.write_text('{ "type" : "integer" ,\n  "minimum": 0 }')
    assert load_answer_schema(spaced) == '{"minimum":0,"type":"integer"}'


@pytest.mark.parametrize("text, message", [
    ('{"type": "object",\n "properties": {"a": }', r"line 2: not JSON \(Expecting value\)"),
    ("[1, 2]", "a JSON Schema is an object, got list"),
    ('{"type": "objekt"}', r"not a valid JSON Schema at type \('objekt' is not valid under any of the given schemas"),
    ('{"properties": {"a": {"minimum": "zero"}}}', "not a valid JSON Schema at properties/a/minimum"),
])
def test_a_bad_schema_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "schema.json"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"^workload\.json_schema: {path}:? .*{message}") as failure:
        load_answer_schema(path)
    assert "\n" not in str(failure.value)


def test_a_missing_schema_file_is_named(tmp_path):
    with pytest.raises(UserError, match=r"^workload\.json_schema: .*no-such\.json: cannot read"):
        load_answer_schema(tmp_path / "no-such.json")

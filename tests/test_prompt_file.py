"""Prompt files: every format parses, and every bad input stops with one exact, fixable line."""

import hashlib
import json
from pathlib import Path

import pytest

from harness.errors import UserError
from workloads.prompt_file import PromptRecord, file_sha256, read_prompt_file

EXAMPLE = Path(__file__).resolve().parent.parent / "yamls" / "prompts" / "example-chats.jsonl"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(UserError) as error:
        read_prompt_file(path)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_jsonl_prompts_messages_and_caps(tmp_path):
    lines = [
        json.dumps({"prompt": "What is TTFT?"}),
        "",
        json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                 {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}],
                    "max_tokens": 16}),
        "   ",
        json.dumps({"prompt": "Line\u2028separator stays inside the prompt", "max_tokens": None}),
    ]
    prompts = read_prompt_file(write(tmp_path, "p.jsonl", "\r\n".join(lines) + "\r\n"))
    assert prompts.records == (
        PromptRecord((("user", "What is TTFT?"),), None, 1),
        PromptRecord((("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Bye")), 16, 3, ("Bye",)),
        PromptRecord((("user", "Line\u2028separator stays inside the prompt"),), None, 5),
    )
    assert prompts.skipped == 0


def test_sharegpt_keeps_system_and_first_human_turn(tmp_path):
    items = [
        {"id": "a", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Q1"},
                                      {"from": "gpt", "value": "A1"}, {"from": "human", "value": "Q2"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "Hi, how can I help?"}]},
        {"id": "c", "conversations": []},
        {"id": "d", "conversations": [{"from": "bing", "value": "greeting"}, {"from": "user", "value": "Q3"},
                                      {"from": "odd-role-later", "value": 7}]},
    ]
    prompts = read_prompt_file(write(tmp_path, "share.json", json.dumps(items)))
    assert prompts.records == (
        PromptRecord((("system", "Be brief."), ("user", "Q1")), None, 1, ("Q2",)),  # Q2: a multi-turn stream's
        PromptRecord((("user", "Q3"),), None, 4),  # a malformed turn after the first human one ends the conversation
    )
    assert prompts.skipped == 2


def test_txt_one_prompt_per_non_blank_line(tmp_path):
    prompts = read_prompt_file(write(tmp_path, "p.txt", "first prompt\n\n  second: with a colon\r\n"))
    assert [(r.messages, r.line, r.max_tokens) for r in prompts.records] == [
        ((("user", "first prompt"),), 1, None), ((("user", "  second: with a colon"),), 3, None)]


def test_sha256_is_of_the_file_bytes_and_a_bom_is_tolerated(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfhello\n")
    prompts = read_prompt_file(path)
    assert prompts.records[0].messages == (("user", "hello"),)
    assert prompts.sha256 == hashlib.sha256(b"\xef\xbb\xbfhello\n").hexdigest() == file_sha256(path)
    assert prompts.path == path


BAD_JSONL = [
    ('{"prompt": "a"}\n\n{"prompt": "a" "b"}\n', "line 3: not valid JSON (Expecting ',' delimiter)"),
    ('["a"]\n', 'line 1: expected a JSON object with "prompt" or "messages", got a list'),
    ('{"max_tokens": 5}\n', 'line 1: needs "prompt" (text) or "messages" (a list of {"role", "content"} objects)'),
    ('{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}\n',
     'line 1: has both "prompt" and "messages"; give one'),
    ('{"prompt": "a", "max_token": 5}\n',
     "line 1: unknown key 'max_token' (known: prompt, messages, max_tokens); did you mean 'max_tokens'?"),
    ('{"prompt": "   "}\n', 'line 1: "prompt" must be non-empty text'),
    ('{"prompt": 12}\n', 'line 1: "prompt" must be non-empty text'),
    ('{"messages": "hi"}\n', 'line 1: "messages" must be a non-empty list of {"role", "content"} objects'),
    ('{"messages": []}\n', 'line 1: "messages" must be a non-empty list of {"role", "content"} objects'),
    ('{"messages": [{"role": "user"}]}\n',
     'line 1: messages[0] must be {"role": "...", "content": "non-empty text"} and nothing else'),
    ('{"messages": [{"role": "user", "content": "a", "name": "x"}]}\n',
     'line 1: messages[0] must be {"role": "...", "content": "non-empty text"} and nothing else'),
    ('{"messages": [{"role": "bot", "content": "a"}]}\n',
     "line 1: messages[0] has unknown role 'bot' (allowed: system, user, assistant)"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n',
     "line 1: the last message is from 'assistant'; a prompt must end with a user message"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}\n',
     "line 1: messages[1] is from 'user' where 'assistant' was expected (after an optional leading system "
     "message, roles alternate user, assistant, user, ...)"),
    ('{"prompt": "a", "max_tokens": 0}\n', 'line 1: "max_tokens" must be a positive integer below 2^31, got 0'),
    ('{"prompt": "a", "max_tokens": "64"}\n', 'line 1: "max_tokens" must be a positive integer below 2^31, got "64"'),
    ('{"prompt": "a", "max_tokens": 1.5}\n', 'line 1: "max_tokens" must be a positive integer below 2^31, got 1.5'),
    ('{"prompt": "a", "max_tokens": true}\n', 'line 1: "max_tokens" must be a positive integer below 2^31, got true'),
]


@pytest.mark.parametrize("text,expected", BAD_JSONL, ids=[e for _, e in BAD_JSONL])
def test_bad_jsonl_lines(tmp_path, text, expected):
    path = write(tmp_path, "p.jsonl", text)
    assert error_of(path) == f"workload.prompts: {path} {expected}"


BAD_SHAREGPT = [
    ('{"conversations": []}', ': expected a ShareGPT export (a JSON list of {"conversations": [...]} objects), '
                              "got an object"),
    ('[\n  {"conversations": []},\n  oops\n]', " line 3: not valid JSON (Expecting value)"),
    ('[{"conversations": []}, 1]', ' item 2: expected an object with a "conversations" list, got a number'),
    ('[{"id": "x"}]', ' item 1: "conversations" must be a list of turns, got null'),
    ('[{"conversations": [{"from": "human"}]}]',
     ' item 1: conversations[0] must be an object with text "from" and "value"'),
    ('[{"conversations": [{"from": "gpt", "value": "hi"}]}]', ": no prompts in the file (1 items without a human "
                                                               "turn skipped)"),
]


@pytest.mark.parametrize("text,expected", BAD_SHAREGPT, ids=[e for _, e in BAD_SHAREGPT])
def test_bad_sharegpt_files(tmp_path, text, expected):
    path = write(tmp_path, "share.json", text)
    assert error_of(path) == f"workload.prompts: {path}{expected}"


def test_file_level_errors(tmp_path):
    missing = tmp_path / "nope.jsonl"
    assert error_of(missing) == f"workload.prompts: {missing}: no such file"
    csv = write(tmp_path, "p.csv", "a,b\n")
    assert error_of(csv) == f"workload.prompts: {csv}: unsupported file type '.csv' (use .jsonl, .json or .txt)"
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert error_of(folder) == f"workload.prompts: {folder}: is a folder, not a prompt file"
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9\n")
    assert error_of(latin) == f"workload.prompts: {latin}: not UTF-8 text (invalid continuation byte at byte 3)"
    for name in ("empty.jsonl", "blank.txt", "empty.txt"):
        path = write(tmp_path, name, "\n  \n" if name == "blank.txt" else "")
        assert error_of(path) == f"workload.prompts: {path}: no prompts in the file"


def test_example_file_is_a_varied_realistic_workload():
    records = read_prompt_file(EXAMPLE).records
    assert 50 <= len(records) <= 200
    assert sum(r.messages[0][0] == "system" for r in records) >= 5
    assert sum(sum(role == "user" for role, _ in r.messages) >= 2 for r in records) >= 5
    assert sum(r.max_tokens is not None for r in records) >= 3
    sizes = [sum(len(content) for _, content in r.messages) for r in records]
    assert max(sizes) >= 20 * min(sizes)
    assert len({r.messages for r in records}) == len(records)  # no prompt repeated
    assert EXAMPLE.stat().st_size < 120_000

"""A user's prompt file, read and checked once, so a bad line stops the run before any engine loads.

Formats, by suffix:

- `.jsonl`: one JSON object per non-blank line, `{"prompt": "text"}` or
  `{"messages": [{"role": "system"|"user"|"assistant", "content": "text"}, ...]}`, with an optional
  `"max_tokens": N` (a positive integer; `null` means not given). Other keys are rejected, so a
  misspelt `max_token` is an error, not a silently uncapped prompt.
- `.json`: a ShareGPT export, `[{"conversations": [{"from": "human", "value": "text"}, ...]}, ...]`.
  The prompt is the system turn (if any) before the first human turn, plus that turn; later turns
  are dropped, as vLLM's ShareGPT benchmark does, except as the later turns of a multi-turn stream
  (`workload.multi_turn`). Items with no human turn are skipped and counted.
- `.txt`: one plain-text prompt per non-blank line.

Every error is a `UserError` starting `workload.prompts: PATH`, then `line N` (jsonl, txt, and JSON
syntax errors) or `item N` (ShareGPT, 1-based) where there is one.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

from harness.errors import UserError, known_names
from harness.fields import is_int
from harness.files import read_file, unique_keys
from workloads.templates import Message, conversation_problem

SUFFIXES = (".jsonl", ".json", ".txt")
_JSONL_KEYS = ("prompt", "messages", "max_tokens")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "system": "system"}


@dataclass(frozen=True)
class PromptRecord:
    messages: Tuple[Message, ...]  # a plain-text prompt is one ("user", text) message
    max_tokens: Optional[int]  # the line's own cap on output tokens, if it gave one
    line: int  # 1-based line (jsonl, txt) or 1-based item index (ShareGPT json), for error messages
    later_turns: Tuple[str, ...] = ()  # the user turns after the first, for multi-turn streams (ShareGPT's too)

    def first_turn(self) -> Tuple[Message, ...]:
        """The conversation up to its first user message (a leading system message kept): a multi-turn stream's
        first request."""
        first_user = next(i for i, (role, _) in enumerate(self.messages) if role == "user")
        return self.messages[:first_user + 1]


@dataclass(frozen=True)
class PromptFile:
    path: Path
    records: Tuple[PromptRecord, ...]  # in file order, never empty
    skipped: int  # ShareGPT items without a human turn (always 0 for jsonl and txt)
    sha256: str  # of the file's bytes, so results name exactly the prompts they measured


def read_prompt_file(path: Path) -> PromptFile:
    """Parse and check every prompt in `path`; a `UserError` names the first problem."""
    path = Path(path)
    where = f"workload.prompts: {path}"
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(f"{where}: unsupported file type {suffix or '(no suffix)'!r} (use .jsonl, .json or .txt)")
    data = read_bytes(path, where, "prompt")
    text = decode(data, where)
    if suffix == ".json":
        records, skipped = _sharegpt_records(text, where)
    else:
        records, skipped = (_jsonl_records if suffix == ".jsonl" else _txt_records)(text, where), 0
    if not records:
        tail = f" ({skipped} items without a human turn skipped)" if skipped else ""
        raise UserError(f"{where}: no prompts in the file{tail}")
    return PromptFile(path, tuple(records), skipped, hashlib.sha256(data).hexdigest())


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the file's bytes, read in chunks (prompt files can be large ShareGPT dumps)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_bytes(path: Path, where: str, kind: str) -> bytes:
    """A user's JSON-lines (or other) file's bytes; UserError `WHERE: no such file` or what else it is instead.
    Shared with the accuracy task files (workloads/tasks.py)."""
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{where}: no such file")
    try:
        return read_file(path, kind)
    except UserError as error:  # a folder, a broken link, a pipe
        raise UserError(f"{where}: {str(error).split(': ', 1)[-1]}") from None


def decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")  # -sig: a BOM from a Windows editor is not part of line 1
    except UnicodeDecodeError as error:
        raise UserError(f"{where}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def numbered_lines(text: str) -> Iterator[Tuple[int, str]]:
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and friends, which are not line ends
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line.rstrip("\r")


def _txt_records(text: str, where: str) -> List[PromptRecord]:
    return [PromptRecord((("user", line),), None, number) for number, line in numbered_lines(text)]


def _jsonl_records(text: str, where: str) -> List[PromptRecord]:
    return [_jsonl_record(line, f"{where} line {number}", number) for number, line in numbered_lines(text)]


def _jsonl_record(line: str, at: str, number: int) -> PromptRecord:
    obj = json_object(line, at, _JSONL_KEYS, '"prompt" or "messages"')
    messages = _jsonl_messages(obj, at)
    users = [content for role, content in messages if role == "user"]
    return PromptRecord(messages, _max_tokens(obj.get("max_tokens"), at), number, tuple(users[1:]))


def json_object(line: str, at: str, keys: Tuple[str, ...], holding: str) -> dict:
    """One JSON-lines line as an object of known keys only (a misspelt key is an error, not a silent default);
    UserError naming `at` (file and line) otherwise. `holding`: what the object is expected to hold, for the message."""
    try:
        obj = json.loads(line, object_pairs_hook=unique_keys)
    except ValueError as error:  # JSONDecodeError, or a key given twice
        raise UserError(f"{at}: not valid JSON ({getattr(error, 'msg', error)})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{at}: expected a JSON object with {holding}, got {_json_type(obj)}")
    unknown = sorted(set(obj) - set(keys))
    if unknown:
        raise UserError(f"{at}: unknown key {unknown[0]!r}" + known_names(unknown[0], list(keys)))
    return obj


def _jsonl_messages(obj: dict, at: str) -> Tuple[Message, ...]:
    if "prompt" in obj and "messages" in obj:
        raise UserError(f'{at}: has both "prompt" and "messages"; give one')
    if "prompt" in obj:
        if not _is_text(obj["prompt"]):
            raise UserError(f'{at}: "prompt" must be non-empty text')
        return (("user", obj["prompt"]),)
    if "messages" not in obj:
        raise UserError(f'{at}: needs "prompt" (text) or "messages" (a list of {{"role", "content"}} objects)')
    return _conversation(obj["messages"], at)


def _conversation(value: Any, at: str) -> Tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise UserError(f'{at}: "messages" must be a non-empty list of {{"role", "content"}} objects')
    messages = tuple(_message(item, index, at) for index, item in enumerate(value))
    problem = conversation_problem([role for role, _ in messages])
    if problem:
        raise UserError(f"{at}: {problem}")
    return messages


def _message(item: Any, index: int, at: str) -> Message:
    if not (isinstance(item, dict) and set(item) == {"role", "content"}
            and isinstance(item["role"], str) and _is_text(item["content"])):
        raise UserError(f'{at}: messages[{index}] must be {{"role": "...", "content": "non-empty text"}} '
                        "and nothing else")
    return item["role"], item["content"]


def _max_tokens(value: Any, at: str) -> Optional[int]:
    if value is None:
        return None
    if not is_int(value) or not 1 <= value < 2**31:  # a cap on one answer's tokens: no model writes 2^31
        raise UserError(f'{at}: "max_tokens" must be a positive integer below 2^31, got {json.dumps(value)}')
    return value


def _sharegpt_records(text: str, where: str) -> Tuple[List[PromptRecord], int]:
    try:
        items = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise UserError(f"{where} line {error.lineno}: not valid JSON ({error.msg})") from None
    except ValueError as error:  # a key given twice
        raise UserError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(items, list):
        raise UserError(f'{where}: expected a ShareGPT export (a JSON list of {{"conversations": [...]}} '
                        f"objects), got {_json_type(items)}")
    records = [_sharegpt_record(item, number, f"{where} item {number}")
               for number, item in enumerate(items, start=1)]
    kept = [record for record in records if record is not None]
    return kept, len(records) - len(kept)


def _sharegpt_record(item: Any, number: int, at: str) -> Optional[PromptRecord]:
    if not isinstance(item, dict):
        raise UserError(f'{at}: expected an object with a "conversations" list, got {_json_type(item)}')
    if not isinstance(item.get("conversations"), list):
        raise UserError(f'{at}: "conversations" must be a list of turns, got {_json_type(item.get("conversations"))}')
    system: Optional[str] = None
    users: List[str] = []
    for index, turn in enumerate(item["conversations"]):
        if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)
                and not _has_surrogate(turn["value"])):
            if users:
                break  # past the first human turn, which is all a single-turn prompt reads: the conversation ends
            raise UserError(f'{at}: conversations[{index}] must be an object with text "from" and "value"')
        role = _SHAREGPT_ROLES.get(turn["from"])
        if role == "system" and system is None and not users and turn["value"].strip():
            system = turn["value"]
        elif role == "user" and turn["value"].strip():
            users.append(turn["value"])
    if not users:
        return None  # no human turn with text: the caller counts it as skipped
    leading = (("system", system),) if system is not None else ()
    return PromptRecord(leading + (("user", users[0]),), None, number, tuple(users[1:]))


def _is_text(value: Any) -> bool:
    """Non-empty text a tokenizer can take."""
    return isinstance(value, str) and bool(value.strip()) and not _has_surrogate(value)


def _has_surrogate(text: str) -> bool:
    """JSON's `\\ud800` escape makes a lone surrogate: no character, and no tokenizer takes it."""
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")

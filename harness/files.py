"""A user's files and folders, checked as they are named: a file read as UTF-8 text (or one line naming the file, the
byte and the line where it is not), and a folder the harness will write into, created and tried before any work.

Every file the harness reads from a user (YAMLs, prompt and trace files, config.json, results CSVs) comes through
here, so a file saved in another encoding (or a binary one given by mistake) is refused with where to look, never a
UnicodeDecodeError's traceback; and a results or charts folder that cannot be written is said before a sweep starts,
not after its first point.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, List, Optional, Tuple, overload

from harness.errors import UserError

# The longest file or folder name the harness makes from a user's label or benchmark_name: file systems allow 255
# bytes, and a suffix (`.node1.log`, `-20261128-101500`) comes after it.
MAX_NAME_CHARS = 96


def decode_utf8(data: bytes, where: str) -> str:
    """`data` as UTF-8 text (a leading BOM dropped, as editors write one); UserError at the first byte that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError(f"{where}: not UTF-8 text: byte {e.start} (line {line}) is {data[e.start:e.start + 1]!r}; "
                        "save the file as UTF-8") from None


@overload
def beside_yaml(config_dir: Path, path: str) -> str: ...


@overload
def beside_yaml(config_dir: Path, path: None) -> None: ...


def beside_yaml(config_dir: Path, path: Optional[str]) -> Optional[str]:
    """A relative path as written in a YAML (a prompt, trace, task or image file): beside the YAML where a file is
    there, else as given (from the working folder); absolute, empty and None paths as they are."""
    if not path or not path.strip() or Path(path).is_absolute() or not (Path(config_dir) / path).exists():
        return path
    return os.path.relpath(Path(config_dir) / path)


def write_whole(path: Path, data: bytes) -> None:
    """`path` replaced at once: written beside it, flushed to disk, then renamed over it, so that a crash at any
    instant leaves the old file or the new one, never part of one."""
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_utf8(path: Path, kind: str) -> str:
    """The file at `path` as text; UserError naming it (and `kind`, what it was read as) when it cannot be read or is
    not UTF-8."""
    return decode_utf8(read_file(path, kind), str(path))


def read_file(path: Path, kind: str) -> bytes:
    """The bytes of the regular file at `path`; UserError naming it when it is missing, a folder, a broken link or
    something that is not a file at all (a FIFO would block the read forever, a device never end)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserError(f"{path}: a link to {os.readlink(path)}, which does not exist")
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a {kind} file")
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file (a pipe or a device), so not a {kind} file")
    try:
        return path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read {kind} ({e.strerror})") from None


def writable_folder(path: Path, key: str) -> Path:
    """`path` as a folder the harness can write into, created where missing; UserError naming `key` (the flag or the
    config key that gave it) when it is a file, cannot be created, or cannot be written."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserError(f"{key}: {path} is a link to {os.readlink(path)}, which does not exist")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{key}: {path} is a file, not a folder") from None
    except OSError as e:
        raise UserError(f"{key}: cannot create the folder {path} ({e.strerror})") from None
    probe = path / f".write-check-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UserError(f"{key}: cannot write into {path} ({e.strerror})") from None
    return path


def load_json(text: str, where: str) -> Any:
    """JSON text as data, each object's keys given once (Python's json keeps the last of a key written twice, so a
    config.json stating `hidden_size` twice would be read with whichever came last); UserError naming `where`."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except ValueError as e:
        raise UserError(f"{where}: not valid JSON ({e})") from None
    except RecursionError:
        raise UserError(f"{where}: nested deeper than JSON here is read") from None


def unique_keys(pairs: List[Tuple[str, Any]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}: give each key once")
        seen[key] = value
    return seen


def path_argument(text: str) -> Path:
    """A path given on the command line (argparse's `type`): an empty one is refused, since Path("") is the current
    folder, where a sweep or its charts would then land unasked."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty; give a path")
    return Path(text)

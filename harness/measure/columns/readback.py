"""A results folder's CSV read back with every row checked against its file's declared columns, so that a damaged
row is named (file and line) and never used as data (docs/measurement.md, "Files are data with integrity").

A row is damaged when it was cut short (the file's last line has no line end: the write that made it did not
finish), when its field count is not the header's, when it holds bytes that are not UTF-8 or a NUL, or when a cell is
not a value of its column as declared (`Column.problem`: a finite number of 0 or more unless declared signed or
infinite, a whole number for the point's key columns, a flag's or a status's words, a required cell filled).
Columns the declarations do not name (a file from an older version) are read as text. The writers end every row with a line end in one durable
write (harness/measure/writers.py), so a kill leaves at most one partial last line, which `--resume` sets aside.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from harness.files import read_file
from harness.measure.columns.base import Column


@dataclass(frozen=True)
class DamagedRow:
    """A row that is not data: where it starts (1-based line), why, and its text as found (kept aside on resume)."""

    line: int
    why: str
    text: str


@dataclass(frozen=True)
class ReadBack:
    """What a file holds: its header (None when not even that line is whole), its sound rows, and its damaged ones.
    `sound_text` is the file's header and sound rows, in order, as written: what the file is once repaired."""

    path: Path
    header: Optional[List[str]]
    rows: List[Dict[str, str]]
    damaged: List[DamagedRow]
    sound_text: str
    sound: List[Tuple[int, str]] = field(default_factory=list)  # each sound row's line and text, in `rows`' order

    def messages(self) -> List[str]:
        """`results.csv line 6: 30 of 142 fields`: one line per damaged row."""
        return [f"{self.path} line {d.line}: {d.why}" for d in self.damaged]


def read_back(path: Path, declared: Mapping[str, Column]) -> ReadBack:
    """The file at `path` (which may not exist: no rows), each row checked against `declared`."""
    if not Path(path).exists() and not Path(path).is_symlink():
        return ReadBack(Path(path), None, [], [], "")
    data = read_file(Path(path), "CSV")  # a folder, a broken link or a pipe where the file should be: one line
    text = data.decode("utf-8", errors="surrogateescape")  # bad bytes stay in their row, which they damage
    text = text.removeprefix("\ufeff")  # a BOM an editor or a spreadsheet added is not part of the header
    records = _records(text)
    if not records:
        return ReadBack(Path(path), None, [], [], "")
    (header_line, header_text, header), *body = records
    if not header_text.endswith("\n") or _has_bad_bytes(header_text):
        return ReadBack(Path(path), None, [], [DamagedRow(header_line, "the header line is cut short or damaged",
                                                         text)], "")
    rows, damaged, sound = [], [], []
    for line, raw, fields in body:
        why = _damage(raw, fields, header, declared)
        if why is None:
            rows.append(dict(zip(header, fields)))
            sound.append((line, raw))
        else:
            damaged.append(DamagedRow(line, why, raw))
    return ReadBack(Path(path), header, rows, damaged, header_text + "".join(raw for _, raw in sound), sound)


def once_per_point(found: ReadBack, key_columns: Sequence[str]) -> ReadBack:
    """`found` with a row that repeats an earlier row's point (the same `key_columns`) moved to its damaged rows:
    a point is measured once, and which of two copies holds its numbers is unknown."""
    first: Dict[tuple, int] = {}
    rows, sound, damaged = [], [], list(found.damaged)
    for row, (line, raw) in zip(found.rows, found.sound):
        key = tuple(row.get(c, "") for c in key_columns)
        if key in first:
            damaged.append(DamagedRow(line, f"the same point as line {first[key]}", raw))
            continue
        first[key] = line
        rows.append(row)
        sound.append((line, raw))
    if len(rows) == len(found.rows):
        return found
    header_text = found.sound_text[:len(found.sound_text) - sum(len(raw) for _, raw in found.sound)]
    return ReadBack(found.path, found.header, rows, sorted(damaged, key=lambda d: d.line),
                    header_text + "".join(raw for _, raw in sound), sound)


def _records(text: str) -> List[Tuple[int, str, List[str]]]:
    """(first line, raw text, fields) of each CSV record; a quoted field may span lines, so the raw text is the
    lines the csv module consumed for it."""
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)  # as the csv module counts them
    reader = csv.reader(io.StringIO(text, newline=""))
    out: List[Tuple[int, str, List[str]]] = []
    consumed = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return out
        except csv.Error:  # an unterminated quote: the rest of the file is one damaged record
            out.append((consumed + 1, "".join(lines[consumed:]), ["\0"]))
            return out
        raw = "".join(lines[consumed:reader.line_num])
        out.append((consumed + 1, raw, fields))
        consumed = reader.line_num


def _damage(raw: str, fields: List[str], header: List[str], declared: Mapping[str, Column]) -> Optional[str]:
    if not raw.endswith("\n"):
        return "cut short (the file ends inside this row: its write did not finish)"
    if _has_bad_bytes(raw):
        return "holds bytes that are not UTF-8"
    control = next((ch for ch in raw if ord(ch) < 32 and ch not in "\t\r\n" or ch == "\x7f"), None)
    if control is not None:  # no writer writes one: a NUL, an escape sequence is damage
        return f"holds a control character ({control!r})"
    if len(fields) != len(header):
        return f"{len(fields)} of {len(header)} fields"
    for name, cell in zip(header, fields):
        column = declared.get(name)
        problem = column.problem(cell) if column is not None else None
        if problem is not None:
            return f"{name}: {problem}"
    return None


def _has_bad_bytes(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)

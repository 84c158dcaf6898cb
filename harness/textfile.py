"""A user's file read as text: UTF-8, or one line naming the file, the byte and the line where it is not.

Every file the harness reads from a user (YAMLs, prompt and trace files, config.json, results CSVs) comes through
here, so a file saved in another encoding (or a binary one given by mistake) is refused with where to look, never a
UnicodeDecodeError's traceback.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import UserError


def decode_utf8(data: bytes, where: str) -> str:
    """`data` as UTF-8 text (a leading BOM dropped, as editors write one); UserError at the first byte that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError(f"{where}: not UTF-8 text: byte {e.start} (line {line}) is {data[e.start:e.start + 1]!r}; "
                        "save the file as UTF-8") from None


def read_utf8(path: Path, kind: str) -> str:
    """The file at `path` as text; UserError naming it (and `kind`, what it was read as) when it cannot be read or is
    not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, not a {kind} file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read {kind} ({e.strerror})") from None
    return decode_utf8(data, str(path))

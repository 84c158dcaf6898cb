"""Results carried through a run's log: marker lines out (`benchmark.py --emit-log-markers`), files back in.

A platform run's only channel home is its log, and a log gets prefixed (timestamps), interleaved with
other output, cut short when a run is killed, and may have trailing whitespace or CRs added or dropped.
So every marker is one self-contained line, found anywhere in a log line:

    @@BENCH-HEAD results.csv crc=1c291ca3 eol=crlf@@ benchmark_name,backend,...   header of a CSV
    @@BENCH-ROW results.csv crc=8b0e2f6a eol=crlf@@ llama-2-70b,hf,...           one CSV record
    @@BENCH-BEGIN manifest.json lines=88 eol=lf crc=5d1a7c02@@                   a whole file ...
    @@BENCH-LINE manifest.json@@ {                                                ... one line each
    @@BENCH-END manifest.json@@

Payloads are the file's own text, so a person can read CSV rows in the log; only backslash, control
characters and a trailing space are escaped, which keeps each record on one line and survives
whitespace stripping. A CRC per record (and per whole file) rejects a line cut by truncation instead
of importing half a row. `parse` prefers a file's complete, verified dump; when the run died before
it, the file is rebuilt from its HEAD and ROW lines: every record printed before the cut.
"""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

TAG = "@@BENCH-"
EOLS = {"crlf": "\r\n", "lf": "\n", "none": ""}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a plain file name: collect writes it under a folder
_MARKER_RE = re.compile(
    r"@@BENCH-(?P<kind>BEGIN|LINE|END|HEAD|ROW) (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
    r"(?P<meta>(?: [a-z]+=[0-9a-z]+)*)@@(?: (?P<payload>.*))?$"
)
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Characters some log pipelines or str.splitlines treat as line breaks, besides the C0 controls.
_BREAKERS = {"\x7f", "\x85", "\u2028", "\u2029"}
_UNESCAPE_RE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(.))")
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t", "s": " "}


# ---- emitting (the run's side) ----

def emit_file(name: str, text: str) -> str:
    """Marker lines carrying all of `text` as file `name`; print them as they are (they end in a newline)."""
    _check_name(name)
    eol = "crlf" if "\r\n" in text else "lf"
    segments = text.split(EOLS[eol])
    meta = f"lines={len(segments)} eol={eol} crc={_crc(text)}"
    lines = [f"{TAG}BEGIN {name} {meta}@@"]
    lines += [_line(f"{TAG}LINE {name}@@", s) for s in segments]
    lines.append(f"{TAG}END {name}@@")
    return "".join(line + "\n" for line in lines)


def emit_path(path: Path, name: Optional[str] = None) -> str:
    """`emit_file` of a file on disk, byte-exact (read as bytes: text mode would turn CSV's CRLF into LF)."""
    path = Path(path)
    return emit_file(name or path.name, path.read_bytes().decode("utf-8"))


def emit_rows(name: str, header: str, rows: Sequence[str]) -> str:
    """One HEAD line, then one ROW line per CSV record (each record's text as written, terminator included)."""
    _check_name(name)
    lines = [_record_line("HEAD", name, header)] + [_record_line("ROW", name, row) for row in rows]
    return "".join(line + "\n" for line in lines)


def emit_row(name: str, header: str, row_line: str) -> str:
    """`emit_rows` for a single record."""
    return emit_rows(name, header, [row_line])


def write(text: str) -> None:
    """Print marker lines to the process's real stdout and flush, so each point's rows reach the log now.

    Never through rich: a console print wraps long lines, and while a progress bar is live on a terminal
    rich swaps sys.stdout for a proxy that prints through the console; either would split a record.
    One flushed write per line: a pipe write of up to 4 KiB is atomic, so output from engine
    subprocesses sharing the stream cannot land inside a record.
    """
    stream = getattr(sys.stdout, "rich_proxied_file", sys.stdout)
    for line in text.splitlines(keepends=True):  # marker text breaks only at \n: all else is escaped
        stream.write(line)
        stream.flush()


def split_records(text: str) -> Tuple[List[str], str]:
    """CSV text -> (complete records, each with its terminator; the unfinished rest).

    A record ends at a newline outside quotes: quoted fields may hold newlines, and the csv module
    doubles quotes inside a field, so an even number of quotes means the record is closed.
    """
    records: List[str] = []
    pending = ""
    for piece in re.findall(r"[^\n]*\n|[^\n]+$", text):
        pending += piece
        if pending.endswith("\n") and pending.count('"') % 2 == 0:
            records.append(pending)
            pending = ""
    return records, pending


class CsvTail:
    """Follows one CSV file as rows are appended; `emit_new()` returns marker lines for the new records.

    Reads only complete records, so a row being written is picked up by the next call. The file's
    first record is its header, repeated before every batch of rows so any surviving stretch of log
    is self-describing.
    """

    def __init__(self, path: Path, name: Optional[str] = None):
        self.path = Path(path)
        self.name = name or self.path.name
        self._offset_bytes = 0
        self._header = ""
        self._inode: Optional[int] = None

    def emit_new(self) -> str:
        if not self.path.exists():
            return ""
        stat = self.path.stat()
        # Rewritten (resume drops orphan samples; a batch search marks its largest batch): start over, since the
        # offset no longer falls between records. Rewrites replace the file, so its inode changes.
        if stat.st_size < self._offset_bytes or stat.st_ino != self._inode:
            self._offset_bytes, self._header, self._inode = 0, "", stat.st_ino
        records = self._read_records()
        if not self._header and records:
            self._header = records.pop(0)
        return emit_rows(self.name, self._header, records) if records else ""

    def _read_records(self) -> List[str]:
        with open(self.path, "rb") as f:
            f.seek(self._offset_bytes)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]  # never decode half of a multi-byte character
        records, rest = split_records(complete.decode("utf-8"))
        self._offset_bytes += len(complete) - len(rest.encode("utf-8"))
        return records


def _record_line(kind: str, name: str, record: str) -> str:
    body, eol = _split_eol(record)
    return _line(f"{TAG}{kind} {name} crc={_crc(record)} eol={eol}@@", body)


def _line(marker: str, payload: str) -> str:
    """Marker, a space and the escaped payload; no space for an empty one (a pipeline could strip it)."""
    return f"{marker} {_escape(payload)}" if payload else marker


def _split_eol(record: str) -> Tuple[str, str]:
    for eol in ("crlf", "lf"):
        if record.endswith(EOLS[eol]):
            return record[: -len(EOLS[eol])], eol
    return record, "none"


def _escape(text: str) -> str:
    out = "".join(_escape_char(c) for c in text) if _needs_escape(text) else text
    return out[:-1] + "\\s" if out.endswith(" ") else out  # a trailing space would not survive rstrip


def _needs_escape(text: str) -> bool:
    return any(c == "\\" or c < " " or c in _BREAKERS for c in text)


def _escape_char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    if c < " " or c in _BREAKERS:
        return f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
    return c


def _crc(text: str) -> str:
    return f"{zlib.crc32(text.encode('utf-8')):08x}"


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ValueError(f"log marker file name {name!r}: letters, digits, '.', '_', '-' only")


# ---- parsing (collect's side) ----

class _Dump:
    def __init__(self, meta: Dict[str, str]):
        self.meta = meta
        self.segments: List[str] = []

    def text(self) -> Optional[str]:
        """The file's text, or None when lines are missing or altered (a cut log, interleaved output)."""
        if self.meta.get("eol") not in ("crlf", "lf") or str(len(self.segments)) != self.meta.get("lines"):
            return None
        text = EOLS[self.meta["eol"]].join(self.segments)
        return text if _crc(text) == self.meta.get("crc") else None


class _Files:
    """What a log says about each file: verified dumps, and CSV headers and rows."""

    def __init__(self):
        self.dumps: Dict[str, str] = {}
        self.open: Dict[str, _Dump] = {}
        self.headers: Dict[str, str] = {}
        self.rows: Dict[str, Dict[str, None]] = {}  # an ordered set: a row printed twice counts once

    def add(self, kind: str, name: str, meta: Dict[str, str], payload: str) -> None:
        if kind == "BEGIN":
            self.open[name] = _Dump(meta)
        elif kind == "LINE" and name in self.open:
            self.open[name].segments.append(_unescape(payload))
        elif kind == "END" and name in self.open:
            text = self.open.pop(name).text()
            if text is not None:
                self.dumps[name] = text
        elif kind in ("HEAD", "ROW"):
            self._add_record(kind, name, meta, payload)

    def _add_record(self, kind: str, name: str, meta: Dict[str, str], payload: str) -> None:
        if meta.get("eol") not in EOLS:
            return
        record = _unescape(payload) + EOLS[meta["eol"]]
        if _crc(record) != meta.get("crc"):
            return  # cut or altered in the log: drop it rather than import half a row
        if kind == "HEAD":
            self.headers.setdefault(name, record)
        else:
            self.rows.setdefault(name, {})[record] = None

    def result(self) -> Dict[str, str]:
        files = {name: self.headers[name] + "".join(self.rows.get(name, {})) for name in self.headers}
        files.update(self.dumps)  # a complete dump supersedes the per-row lines
        return files


def parse(log_text: str) -> Dict[str, str]:
    """Rebuild every file a log carries: {file name: text}, byte-exact.

    A verified full dump wins; without one (run killed before the end, dump cut) a CSV is its header
    plus every complete row line, in log order. Lines without markers are ignored.
    """
    files = _Files()
    for line in log_text.split("\n"):
        # Payloads never end in whitespace (escaped), so trailing CRs or spaces a pipeline adds can go.
        match = _MARKER_RE.search(line.rstrip())
        if match:
            meta = dict(item.split("=", 1) for item in match["meta"].split())
            files.add(match["kind"], match["name"], meta, match["payload"] or "")
    return files.result()


def _unescape(text: str) -> str:
    return _UNESCAPE_RE.sub(_unescape_one, text)


def _unescape_one(match: re.Match) -> str:
    code = match.group(1) or match.group(2)
    if code:
        return chr(int(code, 16))
    return _UNESCAPES.get(match.group(3), match.group(0))


class LogMarkers:
    """A sweep observer (app.session.SweepObserver) that prints rows and files between markers as
    they are written, so `--collect` can rebuild results from a run's log alone."""

    def started(self, out) -> None:
        self.out = out
        self.tails = [CsvTail(out.samples_csv), CsvTail(out.results_csv)]
        write(emit_path(out.manifest_json))

    def point_written(self) -> None:
        for tail in self.tails:
            write(tail.emit_new())

    def finished(self) -> None:
        for path in (self.out.results_csv, self.out.samples_csv, self.out.manifest_json):
            if path.exists():
                write(emit_path(path))

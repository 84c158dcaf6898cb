"""Request traces: a production log's arrival times and per-request lengths, read once and checked line by line.

Formats (`stream.trace_format`, or detected from the file's suffix and header):
- azure: the Azure LLM inference trace CSV (`TIMESTAMP` as a date-time, `ContextTokens`, `GeneratedTokens`);
- mooncake: Mooncake's / aiperf's JSONL (`timestamp` in ms, `input_length`, `output_length`, optional `hash_ids`:
  one id per 512-token block of the prompt, equal ids meaning equal blocks, so prefixes the trace shares are
  shared in the replay);
- burstgpt: the BurstGPT CSV (`Timestamp` in s, `Request tokens`, `Response tokens`).

Any format may give each request's LoRA adapter, by its index (`adapter`: a JSON field, or a CSV column), which an
entry's `lora.mix: trace` names it by (docs/measurement.md, "LoRA adapters").

Every error is a `UserError` naming the file and its 1-based line (docs/measurement.md, "Trace replay").
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from harness.errors import UserError
from harness.fields import is_int, is_number
from harness.files import read_utf8, unique_keys

FORMATS = ("azure", "mooncake", "burstgpt")
# Mooncake's traces give one hash id per block of this many prompt tokens (its FAST'25 release: 6758 tokens, 14 ids).
MOONCAKE_BLOCK_TOKENS = 512
_CSV_COLUMNS = {"azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
                "burstgpt": ("Timestamp", "Request tokens", "Response tokens")}
# A request as read from the file, before `_checked`: its line, time in s, lengths as given, hash ids, and its
# adapter as given (None: none).
_Row = Tuple[int, float, object, object, Tuple[int, ...], object]


@dataclass(frozen=True)
class TraceRequest:
    """One traced request: `time_s` from the trace's first request, its prompt and answer lengths, its prompt's
    block ids (Mooncake), empty where the trace has none, and the index of the LoRA adapter it names (None: none)."""

    time_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: Tuple[int, ...] = ()
    line: int = 0
    adapter: Optional[int] = None


@dataclass(frozen=True)
class Trace:
    """The requests of a trace (or of its window) in time order; `note` says what a window left out."""

    path: Path
    format: str
    requests: Tuple[TraceRequest, ...]
    requests_in_file: int
    note: str = ""

    @property
    def span_s(self) -> float:
        return self.requests[-1].time_s - self.requests[0].time_s

    @property
    def max_input_tokens(self) -> int:
        return max(r.input_tokens for r in self.requests)

    @property
    def max_output_tokens(self) -> int:
        return max(r.output_tokens for r in self.requests)

    @property
    def offered_rate(self) -> float:
        """Requests per second the window offers (inf where every request has the same time)."""
        n = len(self.requests)
        return (n - 1) / self.span_s if self.span_s > 0 else math.inf


def detect_format(path: Path, head: str) -> Optional[str]:
    """The format a file's suffix and first line say, or None."""
    if path.suffix.lower() in (".jsonl", ".json"):
        return "mooncake"
    columns = next(csv.reader([head]), [])
    for name, wanted in _CSV_COLUMNS.items():
        if wanted[0] in columns:  # by its time column: a missing length column is then named
            return name
    return None


@lru_cache(maxsize=8)
def read_trace(path: Path, trace_format: str = "auto") -> Trace:
    """Every request of the file at `path`, times from its first request, checked: in time order, lengths >= 1."""
    where = f"stream.trace: {path}"
    if not Path(path).exists():
        raise UserError(f"{where}: no such file")
    text = read_utf8(Path(path), "trace")  # a BOM a spreadsheet wrote is dropped
    fmt = detect_format(Path(path), text.split("\n", 1)[0]) if trace_format == "auto" else trace_format
    if fmt is None:  # auto, and neither suffix nor header tells
        raise UserError(f"{where}: cannot tell its format from its suffix and header; set stream.trace_format "
                        f"({', '.join(FORMATS)})")
    rows = (_mooncake_rows if fmt == "mooncake" else _csv_rows)(text, fmt, where)
    if not rows:
        raise UserError(f"{where}: no requests in the file")
    requests = _checked(rows, where)
    return Trace(Path(path), fmt, requests, len(requests))


def _mooncake_rows(text: str, fmt: str, where: str) -> List[_Row]:
    rows: List[_Row] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw, object_pairs_hook=unique_keys)
        except ValueError as e:  # not JSON, or a key given twice
            raise UserError(f"{where}: line {line}: not JSON ({getattr(e, 'msg', e)})") from None
        if not isinstance(item, dict):
            raise UserError(f"{where}: line {line}: expected a JSON object")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in item]
        if missing:
            raise UserError(f"{where}: line {line}: missing {', '.join(missing)} (mooncake format: timestamp in ms, "
                            "input_length, output_length, optional hash_ids)")
        hash_ids = item.get("hash_ids") or []
        if not isinstance(hash_ids, list) or not all(is_int(h) and h >= 0 for h in hash_ids):
            raise UserError(f"{where}: line {line}: hash_ids must be a list of integers of 0 or more")
        for key in ("timestamp", "input_length", "output_length", "adapter"):
            if key in item and not (key == "adapter" and item[key] is None) and not is_number(item[key]):  # JSON has numbers: text or true here is a wrong field, not a value
                raise UserError(f"{where}: line {line}: {key} must be a number, got {json.dumps(item[key])}")
        time_s = _number(item["timestamp"], "timestamp", where, line) / 1000.0
        rows.append((line, time_s, item["input_length"], item["output_length"], tuple(hash_ids), item.get("adapter")))
    return rows


def _csv_rows(text: str, fmt: str, where: str) -> List[_Row]:
    reader = csv.DictReader(io.StringIO(text))
    time_col, in_col, out_col = _CSV_COLUMNS[fmt]
    missing = [c for c in _CSV_COLUMNS[fmt] if c not in (reader.fieldnames or ())]
    if missing:
        raise UserError(f"{where}: line 1: missing column {', '.join(missing)} ({fmt} format: "
                        f"{', '.join(_CSV_COLUMNS[fmt])})")
    parse_time = _date_s if fmt == "azure" else _number
    rows: List[_Row] = []
    columns = len(reader.fieldnames or ())
    for row in reader:
        line = reader.line_num
        fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())
        if fields != columns:
            raise UserError(f"{where}: line {line}: {fields} of {columns} fields")
        rows.append((line, parse_time(row[time_col], time_col, where, line), row[in_col], row[out_col], (),
                     row.get("adapter") or None))  # an empty cell: no adapter
    return rows


def _checked(rows: Sequence[_Row], where: str) -> Tuple[TraceRequest, ...]:
    first = rows[0][1]
    out, last = [], -math.inf
    for line, time_s, inputs, outputs, hash_ids, adapter in rows:
        if time_s < last:
            raise UserError(f"{where}: line {line}: out of time order (earlier than the line before)")
        last = time_s
        n_in = _length(inputs, "input", where, line)
        n_out = _length(outputs, "output", where, line)
        if hash_ids and len(hash_ids) * MOONCAKE_BLOCK_TOKENS < n_in:
            raise UserError(f"{where}: line {line}: {len(hash_ids)} hash_ids cover {len(hash_ids)} x "
                            f"{MOONCAKE_BLOCK_TOKENS} tokens, fewer than input_length {n_in}")
        if len(hash_ids) > -(-n_in // MOONCAKE_BLOCK_TOKENS):
            raise UserError(f"{where}: line {line}: {len(hash_ids)} hash_ids for input_length {n_in}: one per "
                            f"{MOONCAKE_BLOCK_TOKENS} tokens is {-(-n_in // MOONCAKE_BLOCK_TOKENS)}")
        # to the microsecond: an epoch float's last bits would put a request at 0.2999999 s outside a window at 0.3
        out.append(TraceRequest(round(time_s - first, 6), n_in, n_out, hash_ids, line, _adapter(adapter, where, line)))
    return tuple(out)


def _length(value, what: str, where: str, line: int) -> int:
    n = _number(value, f"{what} length", where, line)
    if n >= 2**31:
        raise UserError(f"{where}: line {line}: {what} length {value!r} is more tokens than any model takes")
    if n != int(n) or n < 1:
        raise UserError(f"{where}: line {line}: {what} length must be a positive integer, got {value!r}")
    return int(n)


def _adapter(value, where: str, line: int) -> Optional[int]:
    """A request's adapter index: a whole number of 0 or more, in JSON or as CSV text; None where not given."""
    if value is None:
        return None
    n = _number(value, "adapter", where, line)
    if n != int(n) or n < 0 or n >= 2**31:
        raise UserError(f"{where}: line {line}: adapter must be an integer of 0 or more (the adapter's index: "
                        f"lora-0, lora-1, ...), got {value!r}")
    return int(n)


def _number(value, column: str, where: str, line: int) -> float:
    if isinstance(value, bool):
        raise UserError(f"{where}: line {line}: {column} {value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: line {line}: {column} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise UserError(f"{where}: line {line}: {column} {value!r} is not a finite number")
    return number


def _date_s(value, column: str, where: str, line: int) -> float:
    """Azure's TIMESTAMP (`2023-11-16 18:15:46.6805900`): seconds since the epoch, fractions kept to microseconds
    (fromisoformat takes at most six digits)."""
    text = str(value).strip()
    head, dot, fraction = text.partition(".")
    try:
        stamp = datetime.fromisoformat(head)
    except ValueError:
        raise UserError(f"{where}: line {line}: {column} {value!r} is not a date-time (YYYY-MM-DD HH:MM:SS.ffff)") \
            from None
    micro = int((fraction + "000000")[:6]) if dot and fraction.isdigit() else 0
    return stamp.timestamp() + micro / 1e6


def windowed(trace: Trace, start_s: float, duration_s: Optional[float], max_requests: Optional[int],
             time_scale: float) -> Trace:
    """The requests from `start_s` (trace time) for `duration_s`, at most `max_requests` of them, their times from
    the window's first request and multiplied by `time_scale` (0.5: twice as fast). Raises on an empty window."""
    end_s = math.inf if duration_s is None else start_s + duration_s
    chosen = [r for r in trace.requests if start_s <= r.time_s < end_s]
    cut = len(chosen)
    if max_requests is not None:
        chosen = chosen[:max_requests]
    if not chosen:
        raise UserError(f"stream.window: no request of {trace.path} falls in it (the trace spans "
                        f"{trace.span_s:g} s from its first request)")
    first = chosen[0].time_s
    scaled = tuple(TraceRequest((r.time_s - first) * time_scale, r.input_tokens, r.output_tokens, r.hash_ids, r.line,
                                r.adapter) for r in chosen)
    left_out = len(trace.requests) - len(chosen)
    note = ""
    if left_out:
        note = (f"the window replays {len(chosen)} of the trace's {len(trace.requests)} requests (lines "
                f"{chosen[0].line}-{chosen[-1].line})" + (f"; max_requests cut {cut - len(chosen)}" if cut >
                                                          len(chosen) else ""))
    return Trace(trace.path, trace.format, scaled, trace.requests_in_file, note)


"""The results folder: results.csv (one row per point), samples.csv (one per timed batch), requests.csv (one
per timed request of a stream), manifest.json, accuracy.csv (one per entry and accuracy task).

Each row is one durable write (one write of the whole line, then fsync) as its point finishes, so a crash or
`kill -9` loses at most the point in flight and leaves at most one partial last line; `--resume` sets that line
aside (in `<file>.damaged`) and knows exactly which points are done (docs/measurement.md, "Files are data with
integrity"). Every row read back is checked against its file's declared columns (columns/readback.py).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from harness.errors import UserError
from harness.files import MAX_NAME_CHARS, decode_utf8, read_file, writable_folder, write_whole
from harness.measure.columns.base import ROW_KEYS
from harness.measure.columns.readback import ReadBack, once_per_point, read_back
from harness.measure.columns.results import RESULTS
from harness.measure.columns.rows import ACCURACY_TASKS, REQUESTS, SAMPLES, SERVER_METRICS
from harness.measure.manifest import accuracy_rows
from harness.measure.metrics import request_figures
from harness.measure.records import PointKey, PointResult, point_key
from harness.plan.points import SweepPoint
from harness.scenarios.stream import SERVER_SERIES, ServerSeries

SERVER_METRICS_DIR = "server_metrics"  # one CSV per stream point of an entry that scrapes its server
PROFILES_DIR = "profiles"  # one gzipped Chrome trace per point of an entry with profile: true

# Each file's header, in order: the declarations of harness/measure/columns/ (name, unit, meaning), the one list of
# what is written. A row with a key not declared there is refused (csv.DictWriter, extrasaction="raise").
RESULT_COLUMNS = list(RESULTS)
SAMPLE_COLUMNS = list(SAMPLES)
REQUEST_COLUMNS = list(REQUESTS)
ACCURACY_COLUMNS = list(ACCURACY_TASKS)
SERVER_SERIES_COLUMNS = list(SERVER_METRICS)  # the scrape time from the stream's start, then one column per series


def request_rows(result: PointResult) -> List[Dict[str, object]]:
    """Every timed request of a stream point, failed ones too (with their `error`, and the times they got to)."""
    if result.stream is None:
        return []
    t0, rows = result.stream.start_s, []
    for r in result.stream.requests:
        row = {**key_cells(result), "request_index": r.index, "scheduled_s": r.scheduled_s - t0,
               "dispatched_s": r.dispatched_s - t0, "sent_s": r.sent_s - t0,
               "first_token_s": None if r.first_token_s is None else r.first_token_s - t0,
               "last_token_s": None if r.last_token_s is None else r.last_token_s - t0,
               "input_tokens": r.input_tokens, "cached_tokens": r.cached_tokens, "output_tokens": r.output_tokens,
               "output_tokens_source": r.output_tokens_source, "met_slo": 0, "error": r.error,
               # a multi-turn request's prompt is its conversation so far: what it is sent with
               "conversation": r.conversation, "turn": r.turn, "reasoning_tokens": r.reasoning_tokens,
               "inputs": r.inputs, "adapter": r.adapter, "images": len(r.images) or None,
               "image_pixels": sum(w * h for w, h in r.images) or None,
               "context_tokens": r.input_tokens if r.turn is not None else None,
               "answer_valid": None if r.answer_valid is None else int(r.answer_valid)}  # 0/1, as met_slo
        if r.ok:
            f = request_figures(r)
            row.update(ttft_ms=f.ttft_ms, tpot_ms=f.tpot_ms, e2e_ms=f.e2e_ms, ttft_answer_ms=f.ttft_answer_ms,
                       itl_ms_mean=sum(f.itl_ms) / len(f.itl_ms) if f.itl_ms else None,
                       itl_ms_max=max(f.itl_ms) if f.itl_ms else None, send_slip_ms=f.send_slip_ms,
                       client_wait_ms=f.client_wait_ms, queue_ms=f.queue_ms,
                       met_slo=int(result.slo is not None and f.meets(result.slo)))
        else:
            row.update(send_slip_ms=(r.dispatched_s - r.scheduled_s) * 1e3,
                       client_wait_ms=(r.sent_s - r.dispatched_s) * 1e3)
        rows.append(row)
    return rows


def safe_file_name(label: str, fallback: str = "entry") -> str:
    """A label (an entry's, a model's, a point's parts) as one file name in the results folder: letters, digits, '.',
    '_' and '-' only, so no separator or `..` leaves the folder, at most MAX_NAME_CHARS. A label that had to change
    ends with a hash of the whole label, so two labels never share a file (`a/b` and `a-b` differ); one that is
    already a safe name is kept as it is. The manifest keeps which label has which file."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or fallback
    if name == label and len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.blake2b(label.encode(), digest_size=4).hexdigest()
    return f"{name[:MAX_NAME_CHARS - 9].rstrip('-.')}-{digest}"


def server_series_file(result: PointResult) -> Optional[str]:
    """Where a stream point's server series goes, relative to the results folder; None without one."""
    if result.stream is None or result.stream.server is None:
        return None
    c, p = result.context, result.point
    parts = [c.model, c.backend, f"in{p.input_length}", f"out{p.output_length}", f"rate{p.request_rate:g}"]
    if p.max_concurrency:
        parts.append(f"cap{p.max_concurrency}")
    return f"{SERVER_METRICS_DIR}/{safe_file_name('_'.join(parts))}.csv"


def profile_trace_file(result: PointResult) -> Optional[str]:
    """Where a point's profiler trace goes, relative to the results folder; None without one."""
    if result.profile_trace is None:
        return None
    c, p = result.context, result.point
    name = f"{c.model}_{c.backend}_bs{p.batch_size}_in{p.input_length}_out{p.output_length}"
    return f"{PROFILES_DIR}/{safe_file_name(name)}.json.gz"


def server_series_rows(series: ServerSeries) -> List[Dict[str, object]]:
    return [{"t_s": t, **{name: series.values[name][i] for name in SERVER_SERIES}}
            for i, t in enumerate(series.times_s)]


def sample_rows(result: PointResult) -> List[Dict[str, object]]:
    return [{**key_cells(result), "batch_index": s.batch_index, "latency_ms": s.latency_ms, "ttft_ms": s.ttft_ms,
             "tpot_ms": s.tpot_ms, "input_tokens": sum(s.input_tokens), "output_tokens": sum(s.output_tokens),
             "min_output_tokens": s.min_output_tokens, "energy_j": s.energy_j,
             **({"draft_steps": s.spec.draft_steps, "draft_tokens_proposed": s.spec.proposed,
                 "draft_tokens_accepted": s.spec.accepted} if s.spec is not None else {})}
            for s in result.samples]


def key_cells(result: PointResult) -> Dict[str, object]:
    c, p = result.context, result.point
    return {"benchmark_name": c.benchmark_name, "backend": c.backend, "model": c.model, "dtype": c.dtype,
            "hardware": c.hardware, "num_devices": c.num_devices, "tp_size": c.tp_size, "pp_size": c.pp_size,
            "nodes": c.nodes, "scenario": p.scenario,
            "workload": p.workload, "batch_size": p.batch_size, "input_length": p.input_length,
            "output_length": p.output_length, "request_rate": p.request_rate, "max_concurrency": p.max_concurrency}


class ResultsDir:
    """One sweep's output folder. Refuses to overwrite results unless resuming."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.results_csv = self.path / "results.csv"
        self.samples_csv = self.path / "samples.csv"
        self.requests_csv = self.path / "requests.csv"
        self.manifest_json = self.path / "manifest.json"
        self.set_aside: List[str] = []  # what `open` set aside of damaged rows, said on the console

    def has_results(self) -> bool:
        return any(p.exists() for p in (self.results_csv, self.samples_csv, self.requests_csv))

    def open(self, resume: bool) -> Set[PointKey]:
        """Create the folder, or check it may be continued; returns the keys of points already done. Damaged rows
        (a partial last line above all) are set aside first; `set_aside` then says which, one line each."""
        if self.has_results() and not resume:
            raise UserError(f"--output-dir: {self.path} already holds results; pass --resume to continue that sweep "
                            "or choose another folder")
        writable_folder(self.path, "--output-dir")
        self.set_aside = [note for path, columns in self._files() for note in _set_aside_damage(path, columns)]
        done = self._drop_unfinished_searches()
        self._drop_orphan_samples(done)
        return done

    def write_point(self, result: PointResult, row: Dict[str, object]) -> None:
        """Append a finished point: its samples or requests, then `row`, its results.csv row (`sink.result_row`)."""
        # Samples and requests first: a crash between the writes leaves orphan rows, which `open` drops,
        # never a result row without its samples.
        _append(self.samples_csv, SAMPLE_COLUMNS, sample_rows(result))
        requests = request_rows(result)
        if requests:  # a sweep without streams has no requests.csv
            _append(self.requests_csv, REQUEST_COLUMNS, requests)
        server = result.stream.server if result.stream is not None else None
        series_file = server_series_file(result)
        if server is not None and series_file:  # rewritten whole: a resumed sweep's point is new
            (self.path / SERVER_METRICS_DIR).mkdir(exist_ok=True)
            _rewrite(self.path / series_file, SERVER_SERIES_COLUMNS, server_series_rows(server))
        trace_file = profile_trace_file(result)
        if result.profile_trace is not None and trace_file:  # rewritten whole, like a server series
            (self.path / PROFILES_DIR).mkdir(exist_ok=True)
            (self.path / trace_file).write_bytes(result.profile_trace)
        if result.max_batch_size_found is None:
            _append(self.results_csv, RESULT_COLUMNS, [row])
            return
        # A batch search's answer: its row and the mark on the largest batch's row land in one atomic rewrite.
        rows = read_rows(self.results_csv)
        winner = row_key({**row, "batch_size": result.max_batch_size_found})
        for probe in rows:
            if probe.get("search") == "probe" and probe["status"] == "ok" and row_key(probe) == winner:
                probe["max_batch"] = "true"
        _rewrite(self.results_csv, RESULT_COLUMNS, [*rows, row])

    def _files(self):
        return ((self.results_csv, RESULT_COLUMNS), (self.samples_csv, SAMPLE_COLUMNS),
                (self.requests_csv, REQUEST_COLUMNS))

    def write_manifest(self, manifest: dict) -> None:
        """manifest.json, and accuracy.csv from it where entries answered tasks; each replaced whole."""
        write_whole(self.manifest_json, (json.dumps(manifest, indent=2, default=str) + "\n").encode())
        if scores := accuracy_rows(manifest):
            _rewrite(self.path / "accuracy.csv", ACCURACY_COLUMNS, scores)

    def write_config(self, config: dict) -> Path:
        """The resolved config (every default and override in place) as config.yaml: what `reproduce` reruns."""
        import yaml

        path = self.path / "config.yaml"
        path.write_text("# Written by benchmark.py: the resolved config of this sweep (manifest.json: reproduce).\n"
                        + yaml.safe_dump(config, sort_keys=False))
        return path

    def read_manifest(self) -> dict:
        """The manifest of the sweep in this folder ({} when there is none); a damaged one is a UserError: without
        it, --resume cannot tell what the rows were measured with."""
        if not self.manifest_json.exists():
            return {}
        try:
            manifest = json.loads(decode_utf8(read_file(self.manifest_json, "manifest"), str(self.manifest_json)))
        except (ValueError, RecursionError) as e:
            raise UserError(f"--resume: {self.manifest_json} is damaged ({str(e).splitlines()[0]}), so what its rows "
                            "were measured with is unknown; use a new --output-dir") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
            raise UserError(f"--resume: {self.manifest_json} is not a benchmark manifest (no config section); use a "
                            "new --output-dir")
        return manifest

    def _drop_unfinished_searches(self) -> Set[PointKey]:
        """The probes of a rate or batch search that never wrote its result row are dropped: a resumed sweep runs
        the search again from its start, and its probes would otherwise appear twice. Returns the kept keys."""
        rows = read_rows(self.results_csv)
        searches = {row_key(r) for r in rows if r.get("search") == "result"}
        kept = [r for r in rows if r.get("search") != "probe" or _search_key(r) in searches]
        if len(kept) != len(rows):
            _rewrite(self.results_csv, RESULT_COLUMNS, kept)
        return {row_key(r) for r in kept}

    def _drop_orphan_samples(self, done: Set[PointKey]) -> None:
        for path, columns in self._files()[1:]:
            rows = read_rows(path)
            kept = [r for r in rows if row_key(r) in done]
            if len(kept) != len(rows):
                _rewrite(path, columns, kept)


def row_key(row: Mapping[str, Any]) -> PointKey:
    """The point key of a results.csv row (`PointResult.key`), read back or about to be written."""
    def number(value, kind):
        return None if value in ("", None) else kind(value)

    batch_size = number(row["batch_size"], int)
    point = SweepPoint(int(row["input_length"]), int(row["output_length"]), batch_size, row["workload"],
                       number(row["request_rate"], float), number(row["max_concurrency"], int),
                       batch_search=row.get("scenario") == "batch" and batch_size is None)
    return point_key(row["model"], row["backend"], point)


def _search_key(probe_row: Mapping[str, Any]) -> PointKey:
    """The key of the search a probe row belongs to: its point without the batch size or rate it tried."""
    return row_key({**probe_row, "batch_size" if probe_row["scenario"] == "batch" else "request_rate": ""})


# Each file's declarations by its name: what a row read back is checked against.
DECLARED = {"results.csv": RESULTS, "samples.csv": SAMPLES, "requests.csv": REQUESTS}


def read_rows(path: Path) -> List[Dict[str, str]]:
    """The sound rows of a results folder's CSV (damaged ones are never data: `open` sets them aside on resume,
    and the readers that cannot repair name them, plots/load.py)."""
    return _read(path).rows


def _read(path: Path) -> ReadBack:
    """`path` read back against its declarations; a second row of one point (or batch, or request) is damage too."""
    found = read_back(path, DECLARED.get(path.name, {}))
    return once_per_point(found, ROW_KEYS[path.name]) if path.name in ROW_KEYS else found


def _set_aside_damage(path: Path, columns: List[str]) -> List[str]:
    """`path` repaired: its damaged rows appended, as found, to `<name>.damaged` and the file rewritten with its
    sound rows; one note per row set aside. A header of other columns than this version writes is a UserError."""
    found = _read(path)
    if found.header is not None and found.header != columns:
        raise UserError(f"--resume: {path} has other columns than this version writes; start a new folder")
    if not found.damaged:
        return []
    side = path.with_name(path.name + ".damaged")
    with open(side, "ab") as f:
        for d in found.damaged:
            text = d.text if d.text.endswith("\n") else d.text + "\n"
            f.write(f"# {path.name} line {d.line}: {d.why}\n{text}".encode("utf-8", "surrogateescape"))
        f.flush()
        os.fsync(f.fileno())
    write_whole(path, found.sound_text.encode("utf-8", "surrogateescape"))
    then = ("its point runs again" if path.name == "results.csv" else
            "a point without a whole results.csv row runs again")
    return [f"{path.name} line {d.line}: {d.why}; set aside in {side.name}, {then}" for d in found.damaged]


def _csv_line(cells: Sequence[object]) -> bytes:
    """One CSV record as the csv module writes it (quoted where needed), ended by its line end."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(cells)
    return buffer.getvalue().encode()


def _cells(columns: List[str], row: Mapping[str, object]) -> List[object]:
    unknown = [k for k in row if k not in columns]
    if unknown:  # every column is declared (harness/measure/columns/): a row never carries one that is not
        raise ValueError(f"row has undeclared column(s) {', '.join(unknown)}")
    return [_format(row.get(c)) for c in columns]


def _append(path: Path, columns: List[str], rows: Iterable[Mapping[str, object]]) -> None:
    """Each row one write of its whole line, then fsync: a kill leaves complete rows and at most one partial one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if os.fstat(fd).st_size == 0:
            _durable_write(fd, _csv_line(columns))
        for row in rows:
            _durable_write(fd, _csv_line(_cells(columns, row)))
    finally:
        os.close(fd)


def _durable_write(fd: int, data: bytes) -> None:
    written = 0
    while written < len(data):  # a short write (a full disk, a signal): what is left, or the OSError
        count = os.write(fd, data[written:])
        if count == 0:
            raise OSError(f"nothing written to fd {fd}")
        written += count
    os.fsync(fd)


def _rewrite(path: Path, columns: List[str], rows: Sequence[Mapping[str, object]]) -> None:
    """The whole file replaced at once (a batch search's mark, a resume's repair): written beside it, then renamed."""
    write_whole(path, b"".join([_csv_line(columns), *(_csv_line(_cells(columns, row)) for row in rows)]))


def _format(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value

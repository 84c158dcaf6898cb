"""The results folder: results.csv (one row per point), samples.csv (one per timed batch), manifest.json.

Rows are appended, flushed and fsynced as each point finishes, so a crash or `kill -9`
loses at most the point in flight, and `--resume` knows exactly which points are done.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Dict, Iterable, List, Set

from harness.errors import UserError
from harness.metrics import REQUEST_METRICS, REQUEST_STATS, STATS, summarize
from harness.records import PointKey, PointResult, point_key
from harness.sweep import SweepPoint

CONTEXT_COLUMNS = ["benchmark_name", "backend", "model", "dtype", "hardware", "num_devices", "tp_size"]
# For a prompt file, input_length is its prompts' mean length; the real counts are in TOKEN_COLUMNS.
POINT_COLUMNS = ["workload", "batch_size", "input_length", "output_length"]
TOKEN_COLUMNS = ["input_tokens_mean", "input_tokens_max", "output_tokens_mean"]
# Figures only some engines report (blank elsewhere): vLLM's KV cache capacity and size.
ENGINE_COLUMNS = ["kv_cache_capacity_tokens", "engine_kv_cache_bytes"]
# Share of greedy tokens identical to the first backend entry's at the same point (same weights only).
CROSSCHECK_COLUMNS = ["tokens_identical_share"]
RESULT_COLUMNS = (
    CONTEXT_COLUMNS + POINT_COLUMNS + ["num_batches", "num_warmup_batches", "status", "error"]
    + [f"{m}_{s}" for m in ("latency_ms", "ttft_ms", "tpot_ms") for s in STATS]
    + ["throughput_tokens_per_s", "prefill_tokens_per_s", "latency_per_output_token_ms"] + TOKEN_COLUMNS
    + [f"{m}_{s}" for m in REQUEST_METRICS for s in REQUEST_STATS]
    + ["peak_memory_bytes", "estimated_memory_bytes", "load_time_s"]
    + ENGINE_COLUMNS + CROSSCHECK_COLUMNS
)
SAMPLE_COLUMNS = CONTEXT_COLUMNS + POINT_COLUMNS + ["batch_index", "latency_ms", "ttft_ms", "tpot_ms",
                                                    "input_tokens", "output_tokens", "min_output_tokens"]


def result_row(result: PointResult) -> Dict[str, object]:
    row = _keys(result)
    row.update(num_batches=len(result.samples), num_warmup_batches=result.num_warmup_batches,
               status=result.status, error=result.error, peak_memory_bytes=result.peak_memory_bytes,
               estimated_memory_bytes=result.estimated_memory_bytes, load_time_s=result.load_time_s,
               tokens_identical_share=result.tokens_identical_share)
    row.update({k: v for k, v in result.engine_stats.items() if k in ENGINE_COLUMNS})
    if result.samples:
        row.update(summarize(result.samples))
    return row


def sample_rows(result: PointResult) -> List[Dict[str, object]]:
    return [
        {**_keys(result), "batch_index": s.batch_index, "latency_ms": s.latency_ms, "ttft_ms": s.ttft_ms,
         "tpot_ms": s.tpot_ms, "input_tokens": sum(s.input_tokens), "output_tokens": sum(s.output_tokens),
         "min_output_tokens": s.min_output_tokens}
        for s in result.samples
    ]


def _keys(result: PointResult) -> Dict[str, object]:
    c, p = result.context, result.point
    return {"benchmark_name": c.benchmark_name, "backend": c.backend, "model": c.model, "dtype": c.dtype,
            "hardware": c.hardware, "num_devices": c.num_devices, "tp_size": c.tp_size, "workload": p.workload,
            "batch_size": p.batch_size, "input_length": p.input_length, "output_length": p.output_length}


class ResultsDir:
    """One sweep's output folder. Refuses to overwrite results unless resuming."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.results_csv = self.path / "results.csv"
        self.samples_csv = self.path / "samples.csv"
        self.manifest_json = self.path / "manifest.json"

    def has_results(self) -> bool:
        return self.results_csv.exists() or self.samples_csv.exists()

    def open(self, resume: bool) -> Set[PointKey]:
        """Create the folder, or check it may be continued; returns the keys of points already done."""
        if self.has_results() and not resume:
            raise UserError(
                f"--output-dir: {self.path} already holds results; pass --resume to continue that sweep "
                "or choose another folder"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        for path, columns in ((self.results_csv, RESULT_COLUMNS), (self.samples_csv, SAMPLE_COLUMNS)):
            if _header(path) not in (None, columns):
                raise UserError(f"--resume: {path} has other columns than this version writes; start a new folder")
        done = {_row_key(r) for r in read_rows(self.results_csv)}
        self._drop_orphan_samples(done)
        return done

    def write_point(self, result: PointResult) -> None:
        # Samples first: a crash between the two writes leaves orphan samples, which `open` drops,
        # never a result row without its samples.
        _append(self.samples_csv, SAMPLE_COLUMNS, sample_rows(result))
        _append(self.results_csv, RESULT_COLUMNS, [result_row(result)])

    def write_manifest(self, manifest: dict) -> None:
        tmp = self.manifest_json.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        os.replace(tmp, self.manifest_json)

    def read_manifest(self) -> dict:
        return json.loads(self.manifest_json.read_text()) if self.manifest_json.exists() else {}

    def _drop_orphan_samples(self, done: Set[PointKey]) -> None:
        rows = read_rows(self.samples_csv)
        kept = [r for r in rows if _row_key(r) in done]
        if len(kept) != len(rows):
            _rewrite(self.samples_csv, SAMPLE_COLUMNS, kept)


def _row_key(row: Dict[str, str]) -> PointKey:
    point = SweepPoint(int(row["input_length"]), int(row["output_length"]), int(row["batch_size"]), row["workload"])
    return point_key(row["backend"], point)


def _header(path: Path):
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as f:
        return next(csv.reader(f), None)


def read_rows(path: Path) -> List[Dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _append(path: Path, columns: List[str], rows: Iterable[Dict[str, object]]) -> None:
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="raise")
        if new:
            writer.writeheader()
        writer.writerows({k: _format(v) for k, v in row.items()} for row in rows)
        f.flush()
        os.fsync(f.fileno())


def _rewrite(path: Path, columns: List[str], rows: List[Dict[str, str]]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    tmp.unlink(missing_ok=True)
    _append(tmp, columns, rows)
    os.replace(tmp, path)


def _format(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value

"""Read results folders written by benchmark.py into one table (and their requests.csv, for stream
points' per-request figures); nothing else is ever read.

Every column is read as text first so that `--where batch_size=16` compares with exactly what is
in the file; only then are the numeric columns converted. Every row is checked against its file's declared columns
as it is read (harness/measure/columns/readback.py): a damaged row (a partial last line, a cut field) is left out
with a warning naming the file and line, never drawn.
"""

from __future__ import annotations

import functools
import os
import json
import sys
from pathlib import Path
from typing import List, Optional

import pandas as pd

from harness.errors import UserError
from harness.files import read_file
from harness.measure.columns.names import Q, R
from harness.measure.columns.base import ROW_KEYS
from harness.measure.columns.readback import once_per_point, read_back
from harness.measure.columns.results import RESULTS
from harness.measure.columns.rows import REQUESTS
from plots.errors import PlotError

REQUIRED_COLUMNS = (R.backend, R.model, R.dtype, R.hardware, R.batch_size, R.input_length, R.output_length,
                    R.status, R.latency_ms_mean, R.throughput_tokens_per_s)
POINT_COLUMNS = (R.batch_size, R.input_length, R.output_length)
# A stream point's load: its offered rate (inf: a burst) and its concurrency cap (blank: none).
STREAM_POINT_COLUMNS = (R.request_rate, R.max_concurrency)
BATCH, STREAM = "batch", "stream"
# Numbers whose names `_is_metric` does not recognise by their ending.
NUMBER_COLUMNS = (R.request_rate, R.achieved_request_rate, R.throughput_tokens_per_s, R.prefill_tokens_per_s,
                  R.slo_percentile, R.slo_attainment, R.goodput, R.num_requests, R.max_concurrency_reached,
                  R.spec_tokens, R.draft_steps, R.draft_tokens_proposed, R.draft_tokens_accepted, R.acceptance_rate,
                  R.mean_accepted_length, R.speedup_vs_baseline, R.tokens_identical_share,
                  R.peak_memory_bandwidth_gbps, R.peak_tflops, R.decode_bytes_per_step, R.decode_flops_per_step,
                  R.decode_bandwidth_gbps, R.mbu, R.prefill_bytes, R.prefill_flops, R.prefill_tflops, R.mfu,
                  R.roofline_ratio, R.cost_per_million_output_tokens, R.energy_j_per_output_token, R.avg_power_w,
                  R.prefix_cache_hit_rate, R.server_prefix_cache_hit_rate, R.logits_rel_error, R.top1_agreement,
                  R.perplexity, R.perplexity_delta, R.accuracy, R.accuracy_ci95_low, R.accuracy_ci95_high,
                  R.accuracy_examples, R.accuracy_delta, R.accuracy_delta_ci95_low, R.accuracy_delta_ci95_high)
INTEGER_COLUMNS = POINT_COLUMNS + (R.max_concurrency,)
# What a requests.csv row shares with its results.csv row (hardware and model may be filled in from the
# manifest in results only, so they are left out).
REQUEST_JOIN_COLUMNS = (R.benchmark_name, R.backend, R.dtype, R.num_devices, R.tp_size, R.pp_size, R.nodes,
                        R.workload, R.input_length, R.output_length, R.request_rate, R.max_concurrency)
REQUESTS_CSV = "requests.csv"
MAX_WARNINGS = 5  # damaged rows said one by one; past these, counted
# Not in results.csv: the run a row came from (its folder, from the compared folders' common parent: run_names), so
# two runs of one machine, even in folders named alike, can be told apart.
SOURCE_COLUMN = "source"


def results_csv_path(source: Path) -> Path:
    """A results folder or a results.csv file -> the results.csv path; PlotError if there is none."""
    source = Path(source)
    if not source.exists():
        raise PlotError(f"{source}: no such file or folder")
    path = source / "results.csv" if source.is_dir() else source
    if path.is_dir():
        raise PlotError(f"{path}: is a folder, not a results.csv file")
    if path.exists() and not path.is_file():
        raise PlotError(f"{path}: not a regular file (a pipe or a device), so not a results.csv")
    if not path.is_file():
        raise PlotError(f"{source}: no results.csv in this folder (is it a benchmark.py output folder?)")
    return path


def read_manifest(results_csv: Path) -> dict:
    """The manifest.json next to results.csv, or {} when there is none (it is optional); a damaged one is {} too,
    said once on stderr: the labels it would fill come from results.csv alone."""
    path = results_csv.parent / "manifest.json"
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _manifest(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _manifest(path: Path, mtime_ns: int, size: int) -> dict:
    """One version of a manifest file (its time and size name it), read and judged once, however many charts ask."""
    try:
        manifest = json.loads(read_file(path, "manifest").decode("utf-8"))
    except (UserError, ValueError, RecursionError) as e:  # not a file, not UTF-8, not JSON, nested past reading
        print(f"warning: {path}: damaged ({str(e).splitlines()[0]}); hardware and model from results.csv only",
              file=sys.stderr)
        return {}
    if not isinstance(manifest, dict):
        print(f"warning: {path}: not a benchmark manifest (a JSON {type(manifest).__name__}); hardware and model "
              "from results.csv only", file=sys.stderr)
        return {}
    return manifest


def manifest_section(manifest: dict, key: str) -> dict:
    """A section of a manifest as a mapping; {} where it is missing or not a mapping (a damaged file)."""
    value = manifest.get(key) if isinstance(manifest, dict) else None
    return value if isinstance(value, dict) else {}


def manifest_hardware_label(manifest: dict) -> str:
    """Same wording as the `hardware` column: the first GPU's name, else the CPU model and usable cores."""
    hardware = manifest_section(manifest, "hardware")
    gpus = hardware.get("gpus") if isinstance(hardware.get("gpus"), list) else []
    if gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        return str(gpus[0]["name"])
    cpu = hardware.get("cpu_model")
    cores = hardware.get("cpus_usable") or hardware.get("cpu_cores")
    if not cpu:
        return ""
    return f"{cpu} ({cores} cores)" if cores else str(cpu)


def manifest_model_name(manifest: dict) -> str:
    """The model's name as the manifest records it (fills an empty `model` column), or ""."""
    return str(manifest_section(manifest, "model").get("name") or "")


def read_checked(path: Path, declared) -> Optional[pd.DataFrame]:
    """A results folder's CSV as text columns, its sound rows only (each damaged one said on stderr, left out);
    None when not even its header is whole (the damage said too)."""
    found = read_back(path, declared)
    if path.name in ROW_KEYS:
        found = once_per_point(found, ROW_KEYS[path.name])
    missing = [c for c in REQUIRED_COLUMNS if found.header is not None and declared is RESULTS
               and c not in found.header]
    if missing:  # another file given as results.csv: one line, not a warning per row
        raise PlotError(f"{path}: not a benchmark results.csv (missing columns: {', '.join(missing)})")
    messages = found.messages()
    for message in messages[:MAX_WARNINGS]:
        print(f"warning: {message}; left out", file=sys.stderr)
    if len(messages) > MAX_WARNINGS:
        print(f"warning: {path}: {len(messages) - MAX_WARNINGS} more damaged rows left out", file=sys.stderr)
    if found.header is None:
        return None
    return pd.DataFrame(found.rows, columns=found.header, dtype=str)


def read_results(source: Path) -> pd.DataFrame:
    """One results.csv as text columns, with `hardware` and `model` filled from the manifest where empty."""
    path = results_csv_path(source)
    table = read_checked(path, RESULTS)
    if table is None:
        raise PlotError(f"{path}: no results to plot (the file is empty, or not even its header is whole)")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise PlotError(f"{path}: not a benchmark results.csv (missing columns: {', '.join(missing)})")
    manifest = read_manifest(path)
    _fill_empty(table, R.hardware, manifest_hardware_label(manifest))
    _fill_empty(table, R.model, manifest_model_name(manifest))
    if R.workload not in table.columns:  # results written before workloads existed held random ids only
        table[R.workload] = "random"
    if R.scenario not in table.columns:  # results written before request streams were all batches
        table[R.scenario] = BATCH
    table.loc[table[R.scenario].str.strip() == "", R.scenario] = BATCH
    for column in STREAM_POINT_COLUMNS:
        if column not in table.columns:
            table[column] = ""
    _fill_layout(table)
    table = table.rename(columns={"rate_search": R.search})  # its name before batch searches
    if R.search in table.columns:
        # A search's own row holds its answer, no figures: the rows of the batches or rates it tried hold them
        # (the largest batch's is marked max_batch).
        table = table[table[R.search] != "result"].reset_index(drop=True)
    if R.server_metrics_file in table.columns:  # written relative to its results folder
        table[R.server_metrics_file] = [str(path.parent / f) if f else "" for f in table[R.server_metrics_file]]
    table[SOURCE_COLUMN] = path.parent.name
    return table


def _fill_layout(table: pd.DataFrame) -> None:
    for column in (R.pp_size, R.nodes):  # results written before multi-node entries ran on one node, unpipelined
        if column not in table.columns:
            table[column] = "1"


def _fill_empty(table: pd.DataFrame, column: str, value: str) -> None:
    if value:
        table.loc[table[column].str.strip() == "", column] = value


def load_results(sources: List[Path]) -> pd.DataFrame:
    """Every source's rows in one text table; PlotError when there are no sources or no rows at all."""
    if not sources:
        raise PlotError("no results given: pass one or more results folders or results.csv files")
    # The same folder named twice would double every point.
    unique = list(dict.fromkeys(results_csv_path(Path(s)).resolve() for s in sources))
    tables = [read_results(path).assign(**{SOURCE_COLUMN: name}) for path, name in zip(unique, run_names(unique))]
    combined = pd.concat(tables, ignore_index=True)
    if combined.empty:
        names = ", ".join(str(p) for p in unique)
        raise PlotError(f"no whole result rows in {names}: the sweep wrote no points yet, or every row is damaged "
                        "(said above)")
    return combined


def run_names(results_csvs: List[Path]) -> List[str]:
    """Each run's name in a comparison: its folder's path from the folders' common parent, so two runs in folders
    named alike (`h200-20261126/headline`, `h200-20261127/headline`) stay two series; one run is its folder's name."""
    folders = [p.parent for p in results_csvs]
    if len(folders) < 2:
        return [f.name for f in folders]
    common = Path(os.path.commonpath(folders))
    return [str(f.relative_to(common)) if f != common else f.name for f in folders]


def to_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """A copy with point columns as ints and metric columns as floats (empty cells become NaN, "inf" inf)."""
    out = table.copy()
    for column in out.columns:
        if column in INTEGER_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("Int64")
        elif column in NUMBER_COLUMNS or _is_metric(column):
            out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def _is_metric(column: str) -> bool:
    return column.endswith(("_mean", "_p50", "_p90", "_p99", "_std", "_ms", "_s", "_bytes", "_ci95_low", "_ci95_high",
                            "_cv"))


def load_requests(sources: List[Path]) -> Optional[pd.DataFrame]:
    """Every source's requests.csv (one row per timed stream request) as numbers, with the `source` column;
    None when no source has one (a sweep without streams, or results from before requests.csv)."""
    tables = []
    paths = list(dict.fromkeys(results_csv_path(Path(s)).resolve() for s in sources))
    for path, name in zip(paths, run_names(paths)):
        table = read_checked(path.parent / REQUESTS_CSV, REQUESTS)
        if table is None:
            continue  # optional: the stream charts say what they could not draw
        _fill_layout(table)
        if all(c in table.columns for c in REQUEST_JOIN_COLUMNS + (Q.ttft_ms,)):
            table[SOURCE_COLUMN] = name
            tables.append(table)
    return to_numbers(pd.concat(tables, ignore_index=True)) if tables else None

"""Read results folders written by benchmark.py into one table; nothing else is ever read.

Every column is read as text first so that `--where batch_size=16` compares with exactly what is
in the file; only then are the numeric columns converted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pandas as pd

from plots.errors import PlotError

REQUIRED_COLUMNS = ("backend", "model", "dtype", "hardware", "batch_size", "input_length", "output_length",
                    "status", "latency_ms_mean", "throughput_tokens_per_s")
POINT_COLUMNS = ("batch_size", "input_length", "output_length")
# Not in results.csv: the name of the folder a row came from, so two runs of one machine can be told apart.
SOURCE_COLUMN = "source"


def results_csv_path(source: Path) -> Path:
    """A results folder or a results.csv file -> the results.csv path; PlotError if there is none."""
    source = Path(source)
    if not source.exists():
        raise PlotError(f"{source}: no such file or folder")
    path = source / "results.csv" if source.is_dir() else source
    if not path.is_file():
        raise PlotError(f"{source}: no results.csv in this folder (is it a benchmark.py output folder?)")
    return path


def read_manifest(results_csv: Path) -> dict:
    """The manifest.json next to results.csv, or {} when it is missing or unreadable (it is optional)."""
    path = results_csv.parent / "manifest.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def manifest_hardware_label(manifest: dict) -> str:
    """Same wording as the `hardware` column: the first GPU's name, else the CPU model and usable cores."""
    hardware = manifest.get("hardware") or {}
    gpus = hardware.get("gpus") or []
    if gpus and gpus[0].get("name"):
        return str(gpus[0]["name"])
    cpu = hardware.get("cpu_model")
    cores = hardware.get("cpus_usable") or hardware.get("cpu_cores")
    if not cpu:
        return ""
    return f"{cpu} ({cores} cores)" if cores else str(cpu)


def read_results(source: Path) -> pd.DataFrame:
    """One results.csv as text columns, with `hardware` and `model` filled from the manifest where empty."""
    path = results_csv_path(source)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise PlotError(f"{path}: empty file, no results to plot") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: not a readable CSV ({str(e).splitlines()[0]})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise PlotError(f"{path}: not a benchmark results.csv (missing columns: {', '.join(missing)})")
    manifest = read_manifest(path)
    _fill_empty(table, "hardware", manifest_hardware_label(manifest))
    _fill_empty(table, "model", str((manifest.get("model") or {}).get("name") or ""))
    if "workload" not in table.columns:  # results written before workloads existed held random ids only
        table["workload"] = "random"
    table[SOURCE_COLUMN] = path.parent.name
    return table


def _fill_empty(table: pd.DataFrame, column: str, value: str) -> None:
    if value:
        table.loc[table[column].str.strip() == "", column] = value


def load_results(sources: List[Path]) -> pd.DataFrame:
    """Every source's rows in one text table; PlotError when there are no sources or no rows at all."""
    if not sources:
        raise PlotError("no results given: pass one or more results folders or results.csv files")
    # The same folder named twice would double every point.
    unique = list(dict.fromkeys(results_csv_path(Path(s)).resolve() for s in sources))
    tables = [read_results(path) for path in unique]
    combined = pd.concat(tables, ignore_index=True)
    if combined.empty:
        names = ", ".join(str(p) for p in unique)
        raise PlotError(f"no result rows in {names}: the sweep wrote no points yet")
    return combined


def to_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """A copy with point columns as ints and metric columns as floats (empty cells become NaN)."""
    out = table.copy()
    for column in out.columns:
        if column in POINT_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("Int64")
        elif _is_metric(column):
            out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def _is_metric(column: str) -> bool:
    return column.endswith(("_mean", "_p50", "_p90", "_p99", "_std", "_ms", "_s", "_bytes"))

"""What a sweep sends to an experiment tracker, from its results folder alone (docs/guides/tracking.md): the
config's keys as parameters, the manifest's hardware and software as tags, every ok row's figures as metrics keyed
by its point, and the files. Pure functions, the same for MLflow and W&B, and the same live or later (`python -m
plots --track DIR`)."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from harness.measure.columns.base import POINT_KEY
from harness.measure.columns.names import R
from harness.measure.columns.results import RESULTS

# Sent as each tracker's files, where the folder has them (report.md and report.html under plots/).
ARTIFACTS = ("results.csv", "requests.csv", "manifest.json", "plots/report.md", "plots/report.html")
MAX_PARAM_CHARS = 6000  # MLflow's limit on a parameter's value (W&B's config takes more)
# The numbers of a row that are figures, not the point's coordinates nor its counts of what was asked
_KEYS = set(POINT_KEY)
FIGURES = tuple(c.name for c in RESULTS.values() if c.unit and c.name not in _KEYS)


def flat(value: Any, prefix: str = "") -> Dict[str, str]:
    """A config (nested mappings and lists) as dotted keys, `stream.request_rates`, each value as JSON writes it
    (`[2, 8]`, `null`, `true`) or a string as it is; mappings inside lists by index, `backends.0.name`."""
    if isinstance(value, Mapping) and (value or not prefix):  # an empty one is a key too: `grid: {}`
        out: Dict[str, str] = {}
        for key, item in value.items():
            out.update(flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flat(item, f"{prefix}.{i}"))
        return out
    text = value if isinstance(value, str) else json.dumps(value)
    return {prefix: text[:MAX_PARAM_CHARS]}


def sweep_params(manifest: Mapping[str, Any]) -> Dict[str, str]:
    """The sweep's config without its entries (each entry's run holds its own options: `entry_params`)."""
    config = {k: v for k, v in manifest.get("config", {}).items() if k != "backends"}
    return flat(config)


def entry_params(entry: Mapping[str, Any]) -> Dict[str, str]:
    """An entry's options as its manifest records them (`backends[i].options`), and where it ran."""
    return flat({"options": entry.get("options", {}), "placement": entry.get("placement", {})})


def tags(manifest: Mapping[str, Any]) -> Dict[str, str]:
    """The manifest's hardware and software, and what the sweep was: `hardware.cpu_model`, `software.torch`, ..."""
    facts = {"hardware": manifest.get("hardware", {}), "software": manifest.get("software", {}),
             "git_commit": manifest.get("git_commit"), "start_time": manifest.get("start_time"),
             "benchmark_name": manifest.get("config", {}).get("benchmark_name")}
    return {k: v for k, v in flat(facts).items() if v not in ("null", "[]", "{}")}


def entry_runs(manifest: Mapping[str, Any]) -> List[Tuple[str, str, Dict[str, Any]]]:
    """(model label, entry label, its manifest block) of every entry, in the sweep's order; a sweep over `models`
    runs every entry once per model."""
    models = [m.get("label") for m in manifest.get("models", [])] or [manifest.get("model", {}).get("label")]
    entries = manifest.get("backends", [])
    return [(entry.get("model") or models[0], entry["label"], entry) for entry in entries]


def run_name(model: str, entry: str, several_models: bool) -> str:
    return f"{model} / {entry}" if several_models else entry


def point_name(row: Mapping[str, str]) -> str:
    """A row's point as a metric prefix: `bs8_in128_out64` (a batch), `rate4_in65_out16` (a stream; `burst` for all
    at once, `_c16` with max_concurrency); names MLflow and W&B both take (letters, digits, `_`, `.`)."""
    lengths = f"in{row.get(R.input_length) or 'trace'}_out{row.get(R.output_length)}"
    if row.get(R.scenario) == "batch":
        return f"bs{row.get(R.batch_size)}_{lengths}"
    rate = row.get(R.request_rate) or ""
    rate_text = "burst" if rate == "inf" else f"rate{float(rate):g}" if rate else "rate_auto"
    concurrency = f"_c{row[R.max_concurrency]}" if row.get(R.max_concurrency) else ""
    return f"{rate_text}{concurrency}_{lengths}"


def row_metrics(row: Mapping[str, str]) -> Dict[str, float]:
    """The ok row's figures, each a finite number as results.csv holds it; empty for a row that is not ok."""
    if row.get(R.status) != "ok":
        return {}
    out = {}
    for name in FIGURES:
        text = row.get(name) or ""
        try:
            value = float(text)
        except ValueError:  # text columns with a unit (none today), or empty: not a figure
            continue
        if math.isfinite(value):
            out[name] = value
    return out


def point_metrics(rows: Iterable[Mapping[str, str]]) -> Dict[str, Dict[str, float]]:
    """Per point name, its figures: what one entry's run is sent."""
    return {point_name(row): figures for row in rows if (figures := row_metrics(row))}

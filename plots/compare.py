"""A/B comparison of two runs, point by point (docs/measurement.md, "Comparing runs").

Points are matched by their keys (backend entry, workload, batch size, lengths) across two results folders, or
across two backend entries of one folder. Per metric: base, new, their ratio with a 95% interval, and a verdict
that is `faster` or `slower` only when the change is both larger than the threshold and significant on the
per-batch samples (Welch's t-test at 5%). Batch points only: a stream's requests share one engine and are not
independent samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from harness.measure import stats
from harness.measure.columns.names import R, S
from harness.measure.columns.rows import SAMPLES
from plots import load
from plots.errors import PlotError

DEFAULT_METRICS = (R.latency_ms_mean, R.ttft_ms_mean, R.tpot_ms_mean, R.throughput_tokens_per_s)
# metric -> (per-batch column of samples.csv, whether higher is better)
SAMPLED = {R.latency_ms_mean: (S.latency_ms, False), R.ttft_ms_mean: (S.ttft_ms, False),
           R.tpot_ms_mean: (S.tpot_ms, False), R.throughput_tokens_per_s: ("tokens_per_s", True)}
MATCH_COLUMNS = (R.backend, R.workload, R.batch_size, R.input_length, R.output_length)
SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its ok batch rows and per-batch samples, keyed by point."""

    name: str
    rows: Dict[tuple, pd.Series]
    samples: Dict[tuple, pd.DataFrame]
    statuses: Dict[tuple, str]  # every batch point's status, ok or not


@dataclass(frozen=True)
class Verdict:
    key: tuple
    metric: str
    base: float
    new: float
    ratio: float  # new / base
    ratio_low: Optional[float]
    ratio_high: Optional[float]
    p_value: Optional[float]
    verdict: str  # faster | slower | same

    @property
    def change(self) -> float:
        """Signed size of the effect in the metric's own direction: above 0 is better."""
        higher_is_better = SAMPLED[self.metric][1]
        return math.log(self.ratio) if higher_is_better else -math.log(self.ratio)


def welch(base: Sequence[float], new: Sequence[float]) -> Tuple[Optional[float], Optional[float]]:
    """Welch's t-test of the means: (two-sided p-value, Welch–Satterthwaite degrees of freedom); None without
    two samples a side, p = 1 for two constant, equal sides."""
    if len(base) < 2 or len(new) < 2:
        return None, None
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    if va + vb == 0:
        return (1.0 if a.mean() == b.mean() else 0.0), None
    t = (b.mean() - a.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return 2 * (1 - stats.t_cdf(abs(t), df)), df


def judge(key: tuple, metric: str, base_value: float, new_value: float, base: Sequence[float],
          new: Sequence[float], threshold: float) -> Verdict:
    """The ratio new / base of the point's figures, its interval (delta method on the per-batch means, Welch's
    degrees of freedom), and the verdict: beyond `threshold` (a share, 0.05) and p < 0.05, or `same`."""
    ratio = new_value / base_value
    p, df = welch(base, new)
    low = high = None
    if p is not None:
        a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
        relative_var = a.var(ddof=1) / (len(a) * a.mean() ** 2) + b.var(ddof=1) / (len(b) * b.mean() ** 2)
        half = (stats.t_critical(df) if df else 0.0) * ratio * math.sqrt(relative_var)
        low, high = ratio - half, ratio + half
    verdict = "same"
    if p is not None and p < SIGNIFICANCE and abs(ratio - 1) > threshold:
        better = (ratio > 1) == SAMPLED[metric][1]
        verdict = "faster" if better else "slower"
    return Verdict(key, metric, base_value, new_value, ratio, low, high, p, verdict)


def read_side(folder: Path, backend: Optional[str] = None, name: Optional[str] = None) -> Side:
    """A results folder's batch points (of one backend entry, when given) and their samples.csv rows."""
    table = load.to_numbers(load.read_results(folder))
    if not (table[R.scenario] == load.BATCH).any():
        raise PlotError(f"{folder}: no batch points: compare judges batch points by their per-batch samples; a "
                        "stream sweep's points are compared in a report over both folders (python -m plots A B --out "
                        "DIR)")
    table = table[table[R.scenario] == load.BATCH]
    if backend is not None:
        if backend not in set(table[R.backend]):
            raise PlotError(f"--series {backend}: no backend entry of that label in {folder} (entries: "
                            f"{', '.join(sorted(set(table[R.backend])))})")
        table = table[table[R.backend] == backend]
    samples_path = load.results_csv_path(folder).parent / "samples.csv"
    if not samples_path.exists():
        raise PlotError(f"{folder}: no samples.csv beside results.csv: the per-batch samples decide significance")
    found = load.read_checked(samples_path, SAMPLES)
    if found is None:
        state = "empty" if samples_path.stat().st_size == 0 else "damaged: not even its header is whole"
        raise PlotError(f"{samples_path}: {state}; the per-batch samples decide significance")
    samples = load.to_numbers(found)
    samples["tokens_per_s"] = samples[S.output_tokens].astype(float) / (samples[S.latency_ms] / 1e3)
    match = [c for c in MATCH_COLUMNS if backend is None or c != R.backend]
    if table[R.model].nunique() > 1:  # a sweep over `models`: its entries ran once per model
        match.insert(0, R.model)
    ok = table[table[R.status] == "ok"]
    return Side(
        name=name or str(folder),
        rows={_key(r, match): r for _, r in ok.iterrows()},
        samples={_tuple(k): g for k, g in samples.groupby(list(match), dropna=False)},
        statuses={_key(r, match): str(r[R.status]) for _, r in table.iterrows()},
    )


def _key(row: pd.Series, columns: Sequence[str]) -> tuple:
    return tuple(_plain(row[c]) for c in columns)


def _tuple(key) -> tuple:
    return tuple(_plain(k) for k in (key if isinstance(key, tuple) else (key,)))


def _plain(value):
    """Keys from results.csv (Int64) and samples.csv (numbers) compare equal as plain Python values."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return int(value) if float(value).is_integer() else float(value)
    return str(value)


@dataclass(frozen=True)
class Comparison:
    base: Side
    new: Side
    verdicts: List[Verdict]
    missing: List[str]  # points on one side only, or not ok on one side: listed, never failed
    threshold: float
    metrics: Tuple[str, ...]

    @property
    def slower(self) -> List[Verdict]:
        return [v for v in self.verdicts if v.verdict == "slower"]

    def points(self) -> List[tuple]:
        return sorted({v.key for v in self.verdicts}, key=lambda k: tuple(str(x) for x in k))


def compare(base: Side, new: Side, metrics: Sequence[str], threshold: float) -> Comparison:
    for metric in metrics:
        if metric not in SAMPLED:
            raise PlotError(f"--metric {metric}: choose from {', '.join(SAMPLED)} (each has per-batch samples)")
    verdicts, missing = [], []
    for key in sorted(set(base.rows) & set(new.rows), key=lambda k: tuple(str(x) for x in k)):
        unsampled = [side.name for side in (base, new) if key not in side.samples]
        if unsampled:  # no per-batch samples (samples.csv lost or damaged): nothing to judge the change with
            missing.append(f"{describe_key(key)}: no per-batch samples in {' and '.join(unsampled)}")
            continue
        for metric in metrics:
            column = SAMPLED[metric][0]
            b, n = base.rows[key][metric], new.rows[key][metric]
            if pd.isna(b) or pd.isna(n) or b == 0 or n == 0:
                continue  # e.g. TPOT of one-token outputs: no ratio to a 0
            verdicts.append(judge(key, metric, float(b), float(n), _values(base, key, column),
                                  _values(new, key, column), threshold))
    for key in sorted(set(base.statuses) | set(new.statuses), key=lambda k: tuple(str(x) for x in k)):
        if key in base.rows and key in new.rows:
            continue
        missing.append(f"{describe_key(key)}: base {base.statuses.get(key, 'absent')}, new "
                       f"{new.statuses.get(key, 'absent')}")
    return Comparison(base, new, verdicts, missing, threshold, tuple(metrics))


def _values(side: Side, key: tuple, column: str) -> List[float]:
    rows = side.samples.get(key)
    if rows is None:
        return []
    return [float(v) for v in rows[column] if not pd.isna(v)]


def describe_key(key: tuple) -> str:
    """`hf bs 8 in 128/out 64` (the backend is left out when comparing two entries of one folder; the model leads
    where a folder holds several)."""
    *head, workload, batch_size, input_length, output_length = key
    prefix = "".join(f"{part} " for part in head)
    shown = "" if workload == "random" else f" {workload}"
    return f"{prefix}bs {batch_size} in {input_length}/out {output_length}{shown}"

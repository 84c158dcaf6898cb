"""The best configuration at the targets (docs/guides/best.md): per model, scenario and length pair (and per
hardware, where the sources hold several), the configuration whose ok point meeting every target has the most output
tokens/s per GPU (embeddings and rerank: input tokens/s); the runner-up configuration; whether the margin between
them is larger than both intervals; and, where no point meets the targets, which target the closest point misses and
by how much."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import pandas as pd

from harness.measure.columns.names import R
from plots import data, headline
from plots.best.targets import Targets
from plots.data import SERIES
from plots.load import STREAM

GROUP = [R.model, R.scenario, R.input_length, R.output_length]
ALL_HARDWARE = "all hardware"


@dataclass(frozen=True)
class Check:
    """One target at one point: the value read, the limit, and which way it binds."""

    name: str  # `TTFT p99`
    value: float  # NaN: not measured at this point
    limit: float
    at_most: bool  # the value must not pass the limit (latency, cost); else not fall below it (speed)
    unit: str

    @property
    def miss(self) -> float:
        """How far past the limit, as a share of it: <= 0 where met; inf where not measured."""
        if math.isnan(self.value):
            return math.inf
        if self.limit == 0:  # none allowed (invalid answers): the value is the miss
            return self.value
        return (self.value - self.limit) / self.limit if self.at_most else (self.limit - self.value) / self.limit

    def describe(self) -> str:
        if math.isnan(self.value):
            return f"{self.name}: not measured"
        if self.limit == 0:
            return f"{self.name} {self.value:.0%}, none allowed"
        side = "over" if self.at_most else "under"
        return (f"{self.name} {data.fmt(self.value)}{self.unit} against {data.fmt(self.limit)}{self.unit} "
                f"({self.miss:.0%} {side})")


def checks(row: pd.Series, targets: Targets) -> List[Check]:
    """Every stated target at this point. Latency: a stream's request percentiles; a static batch's per-sequence
    ones where the engine stamps each sequence, else its batches'. Where the answers were checked against the
    workload's json_schema or tools, every one must be valid, stated or not: a fast wrong answer is not an answer."""
    out = []
    p = targets.percentile
    if pools(row):  # an answer that comes whole: the TTFT target bounds its latency; no output to hold to the rest
        if targets.ttft_ms is not None:
            out.append(Check(f"latency p{p}", number(row, f"e2e_ms_p{p}"), targets.ttft_ms, True, " ms"))
        return out
    for stated, kind in ((targets.ttft_ms, "ttft"), (targets.tpot_ms, "tpot")):
        if stated is not None:
            out.append(Check(f"{kind.upper()} p{p}", _latency(row, kind, p), stated, True, " ms"))
    if targets.min_user_tokens_per_s is not None:
        out.append(Check("tokens/s per user", number(row, R.output_tokens_per_s_per_user),
                         targets.min_user_tokens_per_s, False, ""))
    if targets.max_cost_per_m_tokens is not None:
        out.append(Check("cost per million output tokens", number(row, R.cost_per_million_output_tokens),
                         targets.max_cost_per_m_tokens, True, ""))
    if targets.max_accuracy_drop is not None and not math.isnan(number(row, R.accuracy_delta)):
        out.append(Check("accuracy change", -number(row, R.accuracy_delta), targets.max_accuracy_drop, True, ""))
    if not math.isnan(number(row, R.invalid_answer_share)):  # answers held to a schema or tools: all must hold
        out.append(Check("invalid answers", number(row, R.invalid_answer_share), 0.0, True, ""))
    return out


def _latency(row: pd.Series, kind: str, percentile: int) -> float:
    if row.get(R.scenario) != STREAM:
        per_sequence = number(row, f"request_{kind}_ms_p{percentile}")
        if not math.isnan(per_sequence):
            return per_sequence
    return number(row, f"{kind}_ms_p{percentile}")


def pools(row: pd.Series) -> bool:
    """An embeddings or rerank point: ranked by the input tokens it takes in (docs/guides/best.md)."""
    return data.pools(row.get(R.output_length))


def per_gpu(row: pd.Series) -> float:
    """What the answer ranks by: output tokens/s per GPU, or an embeddings or rerank point's input tokens/s."""
    if pools(row):
        return number(row, R.input_tokens_per_s) / number(row, R.num_devices)
    return number(row, R.output_tokens_per_s_per_gpu)


def speed_words(row: pd.Series) -> str:
    return "input tokens/s per GPU" if pools(row) else "tokens/s per GPU"


def number(row: pd.Series, column: str) -> float:
    value = pd.to_numeric(row.get(column), errors="coerce")
    return float("nan") if value is None or pd.isna(value) else float(value)


@dataclass(frozen=True)
class Answer:
    group: Dict[str, object]  # model, scenario, input_length, output_length, hardware (or ALL_HARDWARE)
    best: Optional[pd.Series]  # the winning point's row
    runner_up: Optional[pd.Series]  # the best point of the next configuration
    margin_beyond_intervals: Optional[bool]  # None: an interval is missing, or there is no runner-up
    closest_misses: Tuple[str, ...] = ()  # no point meets the targets: what the closest one misses
    closest: Optional[pd.Series] = None
    points_considered: int = 0


def answers(table: pd.DataFrame, targets: Targets) -> List[Answer]:
    """One answer per model, scenario and length pair; per hardware too, then overall, where several are compared."""
    ok = data.plotted(headline.with_speeds(table))  # results from before the per-GPU column get it the same way
    out = []
    for key, group in ok.groupby(GROUP, sort=True):
        labels = dict(zip(GROUP, key))
        hardware = list(dict.fromkeys(group[R.hardware].astype(str)))
        if len(hardware) > 1:
            out += [_answer(group[group[R.hardware].astype(str) == h], targets, {**labels, R.hardware: h})
                    for h in hardware]
        out.append(_answer(group, targets, {**labels, R.hardware: hardware[0] if len(hardware) == 1 else ALL_HARDWARE}))
    return out


def _answer(rows: pd.DataFrame, targets: Targets, group: Dict[str, object]) -> Answer:
    misses = [max([c.miss for c in checks(r, targets)], default=-math.inf) for _, r in rows.iterrows()]
    rows = rows.copy()  # one block: the rows' columns are many, and two more are added
    rows["_miss"], rows["_per_gpu"] = misses, [per_gpu(r) for _, r in rows.iterrows()]
    meeting = rows[(rows["_miss"] <= 0) & rows["_per_gpu"].notna()]
    if meeting.empty:
        closest = rows.loc[rows["_miss"].idxmin()] if len(rows) else None
        said = tuple(c.describe() for c in checks(closest, targets) if c.miss > 0) if closest is not None else ()
        return Answer(group, None, None, None, said, closest, len(rows))
    per_config = meeting.sort_values("_per_gpu", ascending=False).drop_duplicates(SERIES)
    best = per_config.iloc[0]
    runner = per_config.iloc[1] if len(per_config) > 1 else None
    return Answer(group, best, runner, _beyond(best, runner), points_considered=len(rows))


def per_gpu_interval(row: pd.Series) -> Tuple[float, float]:
    """The point's 95% throughput interval over its devices (NaN where it has none: a stream's)."""
    if pools(row):
        return math.nan, math.nan
    devices = number(row, R.num_devices)
    return (number(row, R.throughput_tokens_per_s_ci95_low) / devices,
            number(row, R.throughput_tokens_per_s_ci95_high) / devices)


def _beyond(best: pd.Series, runner: Optional[pd.Series]) -> Optional[bool]:
    """Whether the winner's per-GPU throughput interval lies wholly above the runner-up's."""
    if runner is None:
        return None
    low, high = per_gpu_interval(best)[0], per_gpu_interval(runner)[1]
    return None if math.isnan(low) or math.isnan(high) else low > high

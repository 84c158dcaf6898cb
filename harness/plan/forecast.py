"""A calibrated forecast: how close each engine came to its floor where it was measured, carried to other hardware.

`--plan --calibrate DIR ...` reads the ok batch rows of results folders (any hardware) and, per engine and phase,
the fraction of the floor each reached: floor time / measured time, the floor from the row's own bytes, FLOPs and
peaks. Where the memory bound binds that is the row's MBU (decode) and where compute binds its MFU (prefill). The
fraction depends on the batch above all (a batch of 1 leaves a GPU's cores idle, a large one fills them), so it is
fitted against the batch: linear in log2(batch) between calibrated batch sizes, because batch sizes are swept in
powers of two and the fraction moves by steps per doubling; held at the end value outside (never extrapolated: a
trend past the data is a guess). The interval is the min..max of the fractions measured at the calibrated batch
sizes that bracket the target's (over every length measured there), each row's fraction taken at both ends of its
time's 95% interval where the row has one: the spread the engine showed, its measurements' noise included; not a
statistical bound. Forecast time = floor time / fraction.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from harness.errors import UserError
from harness.files import read_file
from harness.model.hardware import Peaks

DECODE, PREFILL = "decode", "prefill"
# results.csv columns (harness/measure/columns/: the plan sits below measure, so it names them by their text).
# `scenario` is not among them: a folder from before streams has only batch rows.
NEEDED = ("backend", "status", "batch_size", "ttft_ms_mean", "tpot_ms_mean",
          "peak_memory_bandwidth_gbps", "peak_tflops", "decode_bytes_per_step", "decode_flops_per_step",
          "prefill_bytes", "prefill_flops")


@dataclass(frozen=True)
class Sample:
    """One measured row's achieved fraction of its floor in one phase."""

    engine: str
    phase: str
    batch_size: int
    fraction: float
    low: float  # the fraction at the slow end of the row's 95% interval of the time (the fraction itself without one)
    high: float


@dataclass(frozen=True)
class Fraction:
    """The fitted fraction at one batch size, and the interval around it."""

    value: float
    low: float
    high: float
    batch_sizes: Tuple[int, ...]  # the calibrated batch sizes it comes from


@dataclass(frozen=True)
class Curve:
    """One engine's fraction against the batch in one phase: every calibrated batch size's samples."""

    by_batch: Dict[int, Tuple[float, ...]]
    bands: Dict[int, Tuple[float, float]]  # per batch size: the lowest and highest fraction within the rows' intervals

    def at(self, batch_size: int) -> Fraction:
        sizes = sorted(self.by_batch)
        if batch_size <= sizes[0] or batch_size >= sizes[-1] or batch_size in self.by_batch:
            near = min(sizes, key=lambda b: abs(math.log2(b) - math.log2(batch_size)))
            low, high = self.bands[near]
            return Fraction(statistics.median(self.by_batch[near]), low, high, (near,))
        i = bisect.bisect_left(sizes, batch_size)
        lo, hi = sizes[i - 1], sizes[i]
        t = (math.log2(batch_size) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
        m_lo, m_hi = statistics.median(self.by_batch[lo]), statistics.median(self.by_batch[hi])
        low, high = min(self.bands[lo][0], self.bands[hi][0]), max(self.bands[lo][1], self.bands[hi][1])
        return Fraction(m_lo + t * (m_hi - m_lo), low, high, (lo, hi))


@dataclass(frozen=True)
class Calibration:
    """Curves per (engine, phase), the folders they come from, and CPU peaks those folders measured (per dtype)."""

    curves: Dict[Tuple[str, str], Curve]
    folders: Tuple[Path, ...]
    cpu_peaks: Dict[str, Peaks]

    def curve(self, label: str, engine: str, phase: str) -> Tuple[Optional[Curve], str]:
        """The entry's own label's curve, else its engine name's: (curve, the key it matched); (None, '') if neither."""
        for key in (label, engine):
            if (key, phase) in self.curves:
                return self.curves[(key, phase)], key
        return None, ""

    @property
    def engines(self) -> List[str]:
        return sorted({engine for engine, _ in self.curves})


def _number(row: Dict[str, str], key: str) -> Optional[float]:
    try:
        value = float(row.get(key) or "nan")
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def samples_of(row: Dict[str, str]) -> List[Sample]:
    """The row's fractions: decode where it has a TPOT, prefill where it has a TTFT; none without its peaks."""
    bandwidth, tflops = _number(row, "peak_memory_bandwidth_gbps"), _number(row, "peak_tflops")
    batch = _number(row, "batch_size")
    if row.get("status") != "ok" or row.get("scenario", "batch") != "batch" or not (bandwidth and tflops and batch):
        return []
    out = []
    for phase, moved, computed, measured_ms in ((DECODE, "decode_bytes_per_step", "decode_flops_per_step",
                                                 "tpot_ms_mean"),
                                                (PREFILL, "prefill_bytes", "prefill_flops", "ttft_ms_mean")):
        b, f, ms = _number(row, moved), _number(row, computed), _number(row, measured_ms)
        if b and f and ms:
            floor_ms = max(b / (bandwidth * 1e9), f / (tflops * 1e12)) * 1e3
            stem = measured_ms.replace("_mean", "")
            slow, fast = (_number(row, f"{stem}_ci95_{end}") or ms for end in ("high", "low"))
            out.append(Sample(row["backend"], phase, int(batch), floor_ms / ms, floor_ms / max(slow, ms),
                              floor_ms / min(fast, ms)))
    return out


# results.csv's header (None: not even that line is whole) and sound rows. The measure layer reads the file, checking
# each row against its declared columns (the plan sits below it): the app hands that reader down.
ReadCsv = Callable[[Path], Tuple[Optional[List[str]], List[Dict[str, str]]]]


def read_folder(folder: Path, read_csv: ReadCsv) -> List[Dict[str, str]]:
    """results.csv's rows; a folder without one, or without the columns the fractions need, is a UserError."""
    path = folder / "results.csv"
    if not path.exists() and not path.is_symlink():
        raise UserError(f"--calibrate: {folder} has no results.csv; give results folders (results/RUN)")
    header, rows = read_csv(path)  # a folder, a pipe, a broken link: one line naming it
    if header is None:
        raise UserError(f"--calibrate: {path}: empty, or not even its header is whole")
    missing = [c for c in NEEDED if c not in header]
    if missing:
        raise UserError(f"--calibrate: {path} lacks column(s) {', '.join(missing)}; needs a results folder "
                        "written with MBU and MFU (peaks known: docs/measurement.md)")
    return rows


def calibrate(folders: Sequence[Path], read_csv: ReadCsv) -> Calibration:
    samples: List[Sample] = []
    cpu_peaks: Dict[str, Peaks] = {}
    for folder in folders:
        found = [s for row in read_folder(folder, read_csv) for s in samples_of(row)]
        if not found:
            raise UserError(f"--calibrate: {folder}/results.csv has no ok batch row with a TTFT or TPOT and peaks")
        samples += found
        for dtype, peaks in _probed_peaks(folder).items():
            cpu_peaks.setdefault(dtype, peaks)
    grouped: Dict[Tuple[str, str], Dict[int, List[Sample]]] = {}
    for s in samples:
        grouped.setdefault((s.engine, s.phase), {}).setdefault(s.batch_size, []).append(s)
    curves = {key: Curve({b: tuple(s.fraction for s in v) for b, v in by_batch.items()},
                         {b: (min(s.low for s in v), max(s.high for s in v)) for b, v in by_batch.items()})
              for key, by_batch in grouped.items()}
    return Calibration(curves, tuple(folders), cpu_peaks)


def _probed_peaks(folder: Path) -> Dict[str, Peaks]:
    """The CPU probe's peaks the folder's sweep measured (hardware_peaks.json; GPU sweeps write none)."""
    path = folder / "hardware_peaks.json"
    if not path.is_file():
        return {}
    try:
        stored = json.loads(read_file(path, "peaks").decode("utf-8"))
        return {dtype: Peaks(float(p["memory_bandwidth_gbps"]), float(p["tflops"]), f"{p['source']} ({path})")
                for dtype, p in stored.items()}
    except (UserError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise UserError(f"--calibrate: {path} is damaged ({type(e).__name__}: {e}); delete it and its folder's "
                        "peaks are probed again on a resume, or calibrate from another folder") from None


@dataclass(frozen=True)
class Forecast:
    """A point's forecast: each figure at the fitted fraction, and its interval (the fractions' min..max). Times in
    ms; the `_low`/`_high` of a time come from the high/low fraction. TPOT None for a one-token output."""

    engine: str  # the calibration's key that matched: the entry's label or its engine name
    ttft_ms: float
    ttft_ms_low: float
    ttft_ms_high: float
    tpot_ms: Optional[float]
    tpot_ms_low: Optional[float]
    tpot_ms_high: Optional[float]
    prefill_fraction: Fraction
    decode_fraction: Optional[Fraction]

    def latency_ms(self, output_length: int, which: str = "") -> float:
        """TTFT and the decode steps after it; `which`: '' the forecast, '_low' or '_high' its interval's ends."""
        tpot = getattr(self, f"tpot_ms{which}") or 0.0
        return getattr(self, f"ttft_ms{which}") + (output_length - 1) * tpot

"""One overhead figure: a harness path against the bare loop of the same engine, alternated in one process.

Every path script beside this one loads one engine and builds two callables over the same inputs and sampling,
each returning milliseconds: the harness's path (its backend's `run` or `serve`, timed as the harness times it)
and the loop a user would write against the engine itself, timed with `perf_counter` around the call. `alternate`
runs them in pairs, the order flipped every pair so that drift on this shared machine hits both alike; `emit`
prints one `OVERHEAD {json}` line with the median of the per-pair ratios (harness / bare) and its distribution-free
95% interval (harness/measure/stats.py, median_interval). benchmarks/overhead_all.py gathers the lines into one
table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness.measure.stats import median_interval  # noqa: E402
from harness.run.worker import quiet_import_noise  # noqa: E402

quiet_import_noise()  # before any path script imports its engine: the sweep's workers print no torchao noise either

TARGET = 0.01  # the harness adds nothing a user would see: 1.00 +/- 0.01
WARMUP_PAIRS = 5
MARK = "OVERHEAD "

Timed = Callable[[int], float]  # pair index -> ms; both sides of pair i get the same inputs


@dataclass(frozen=True)
class Figure:
    path: str  # the harness path, "vllm batch"
    bare: str  # the loop it is held to, "llm.generate, same SamplingParams"
    shape: str  # "batch 8, input 128, output 32"
    harness_ms: float  # medians over the timed pairs
    bare_ms: float
    ratio: float  # median of the per-pair ratios harness / bare
    low: Optional[float]  # its 95% interval
    high: Optional[float]
    pairs: int
    note: str = ""

    @property
    def verdict(self) -> str:
        """ok: the interval lies within the target; OFF: wholly outside it; noise: the interval is wider than the
        target band, so this machine cannot tell (said with the interval, never a widened target); edge: a narrow
        interval across the target's edge."""
        if self.low is None or self.high is None:
            return "noise"
        if 1 - TARGET <= self.low and self.high <= 1 + TARGET:
            return "ok"
        if self.high < 1 - TARGET or self.low > 1 + TARGET:
            return "OFF"
        return "noise" if self.high - self.low > 2 * TARGET else "edge"


def alternate(harness: Timed, bare: Timed, pairs: int, warmup: int = WARMUP_PAIRS) -> Tuple[List[float], List[float]]:
    """Both callables `pairs` times after `warmup` untimed pairs, the order flipped every pair: (harness, bare) ms.
    Each is handed the pair's index, so that both sides of a pair run the same inputs."""
    ours, theirs = [], []
    for i in range(warmup + pairs):
        if i % 2 == 0:
            a, b = harness(i), bare(i)
        else:
            b, a = bare(i), harness(i)
        if i >= warmup:
            ours.append(a)
            theirs.append(b)
    return ours, theirs


def figure(path: str, bare: str, shape: str, harness_ms: Sequence[float], bare_ms: Sequence[float],
           note: str = "") -> Figure:
    ratios = [h / b for h, b in zip(harness_ms, bare_ms)]
    interval = median_interval(ratios)
    return Figure(path, bare, shape, statistics.median(harness_ms), statistics.median(bare_ms),
                  statistics.median(ratios), interval and interval.low, interval and interval.high, len(ratios), note)


def emit(fig: Figure) -> None:
    print(MARK + json.dumps(asdict(fig)), flush=True)


def parse(line: str) -> Optional[Figure]:
    return Figure(**json.loads(line[len(MARK):])) if line.startswith(MARK) else None


# (side, pair index) -> each request's token ids, side "harness" or "bare"
Tokens = Dict[Tuple[str, int], Sequence[Sequence[int]]]


def check_tokens(tokens: Tokens, count: int, output_length: int) -> None:
    """Every request of every pair got exactly the forced length on both sides, and (greedy) the same ids: otherwise
    the two sides did not do the same work, and their ratio means nothing."""
    for i in sorted({i for _, i in tokens}):
        ours, theirs = [list(map(tuple, tokens[side, i])) for side in ("harness", "bare")]
        lengths = [len(t) for t in ours], [len(t) for t in theirs]
        if lengths != ([output_length] * count,) * 2:
            raise SystemExit(f"pair {i}: token counts harness {lengths[0]}, bare {lengths[1]}, asked for "
                             f"{output_length} each")
        if ours != theirs:
            raise SystemExit(f"pair {i}: greedy tokens differ between harness and bare")


def served(timing):
    """A harness stream's timing with every request answered; a failed one ends the script."""
    failed = [r for r in timing.requests if not r.ok]
    if failed:
        raise SystemExit(f"harness request {failed[0].index} failed: {failed[0].error}")
    return timing


def batch_shape(batch_size: int, input_length: int, output_length: int) -> str:
    return f"batch {batch_size}, input {input_length}, output {output_length}"


def arguments(description: str, batch_sizes: Sequence[int] = (1, 8, 16), pairs: int = 30,
              extra: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> argparse.Namespace:
    """The options every path script takes, so overhead_all.py can hand the same ones to each; `extra` adds a
    script's own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=pairs, help=f"timed pairs per shape (default {pairs})")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(batch_sizes))
    parser.add_argument("--input-length", type=int, default=128)
    parser.add_argument("--output-length", type=int, default=32)
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def with_rate(parser: argparse.ArgumentParser) -> None:
    """A stream script's own option: its Poisson rate (`--batch-sizes` is then each stream's request count)."""
    parser.add_argument("--rate", type=float, default=16.0, help="Poisson requests/s of every stream (default 16)")

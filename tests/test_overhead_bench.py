"""benchmarks/overhead/: the pairs' statistics and verdicts, and one path script end to end on a small shape."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "overhead"))

from pairs import Figure, alternate, figure, parse  # noqa: E402


def verdict(low, high):
    return Figure("p", "b", "s", 1.0, 1.0, (low + high) / 2, low, high, 30).verdict


@pytest.mark.parametrize("low, high, expected", [
    (0.995, 1.005, "ok"), (1.02, 1.05, "OFF"), (0.90, 0.98, "OFF"),
    (0.97, 1.03, "noise"),  # wider than the whole +/- 1% band: this machine cannot tell
    (0.986, 0.993, "edge"),  # narrow, across the band's edge
])
def test_a_verdict_says_what_the_interval_allows(low, high, expected):
    assert verdict(low, high) == expected


def test_pairs_alternate_their_order_and_hand_both_sides_the_same_index():
    calls = []
    ours, theirs = alternate(lambda i: calls.append(("h", i)) or 2.0, lambda i: calls.append(("b", i)) or 1.0,
                             pairs=3, warmup=1)
    assert calls == [("h", 0), ("b", 0), ("b", 1), ("h", 1), ("h", 2), ("b", 2), ("b", 3), ("h", 3)]
    assert ours == [2.0] * 3 and theirs == [1.0] * 3
    f = figure("p", "b", "s", [2.0, 2.2, 1.8, 2.0, 2.0, 2.0], [1.0] * 6)
    assert f.ratio == 2.0 and (f.low, f.high) == (1.8, 2.2)


@pytest.mark.engine
def test_a_path_script_prints_a_figure_the_table_reads():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "overhead" / "hf_batch.py"), "--pairs", "6",
                           "--batch-sizes", "2", "--input-length", "16", "--output-length", "4"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = [f for f in map(parse, proc.stdout.splitlines()) if f is not None]
    assert [(f.path, f.shape, f.pairs) for f in figures] == [("hf batch", "batch 2, input 16, output 4", 6)]
    f = figures[0]
    assert f.harness_ms > 0 and f.bare_ms > 0 and 0.5 < f.ratio < 2  # the same generate on both sides
    assert "Failed to load" not in proc.stderr  # torchao's import noise is silenced, as in the sweep's workers

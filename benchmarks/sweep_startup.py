"""What a sweep of several entries costs before and around its work (issue 49, docs/measurement.md, "Where a sweep's
time goes"): `benchmark.py` started as a user starts it, `results.csv` polled for its first row, the process timed
to its exit.

Sweeps of tiny-llama, one point an entry (batch 1, input 16, output 8, one warm-up and one timed batch): 4 hf
entries, a 16-entry synthetic grid, and one vLLM entry under vLLM's default processes and with `multiprocessing:
false` (its engine core and model in the entry's process). Each is run `--runs` times, the sweeps taking turns; with
more than one `--tree` (checkouts of this repository, e.g. a `git worktree` of an older commit), the trees take turns
run by run too, so that the machine's drift falls on each alike, and the medians are compared.

    .venv/bin/python benchmarks/sweep_startup.py [--runs 5] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from cli_types import positive

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.01
BASE = ("model: {preset: tiny-llama, weights: random, dtype: fp32}\nbatch_sizes: [1]\ninput_lengths: [16]\n"
        "output_lengths: [8]\nnum_batches: 1\nnum_warmup_batches: 1\n")
SWEEPS = {
    "4 hf entries": BASE + "benchmark_name: startup-hf\nbackends:\n" + "".join(
        f"  - {{name: hf, label: hf{i}, device: cpu}}\n" for i in range(4)),
    "a 16-entry synthetic grid": BASE + "benchmark_name: startup-grid\nbackends:\n  - name: synthetic\n"
                                        "    grid: {ttft_ms: [1, 2, 3, 4], tpot_ms: [0.5, 1, 1.5, 2]}\n",
    **{f"a vLLM entry, multiprocessing: {mp}": BASE + f"benchmark_name: startup-vllm\nbackends:\n  - {{name: vllm, "
       f"device: cpu, enforce_eager: true, kv_cache_memory_bytes: 268435456, cpu_threads_bind: all, "
       f"cpu_reserved_cpus: 0, multiprocessing: {mp}}}\n" for mp in ("true", "false")},
}
# The pair whose ratio is printed: the in-process engine against vLLM's default, run by run.
VLLM_PAIR = ("a vLLM entry, multiprocessing: true", "a vLLM entry, multiprocessing: false")


def timed_sweep(tree: Path, yaml: Path, out: Path) -> Dict[str, float]:
    """One sweep: seconds to its first row of results.csv and to its exit, and its own time budget."""
    results = out / "results.csv"
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "benchmark.py", str(yaml), "--output-dir", str(out)], cwd=tree,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first_row_s = None
    while proc.poll() is None:
        if first_row_s is None and results.exists() and results.read_text().count("\n") >= 2:  # header and a row
            first_row_s = time.monotonic() - start
        time.sleep(POLL_S)
    exit_s = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {yaml.name} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
    budget = json.loads((out / "manifest.json").read_text())["time_budget_s"]
    with results.open() as f:
        first = next(csv.DictReader(f))
    return {"first_row_s": first_row_s if first_row_s is not None else exit_s, "exit_s": exit_s,
            "entries_s": budget["entries_s"], "charts_s": budget["charts_s"],
            "tokens_per_s": float(first["throughput_tokens_per_s"])}


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive(int, 1), default=5, help="runs of each sweep on each tree (default 5)")
    parser.add_argument("--tree", action="append", type=Path, default=[],
                        help="a checkout to run benchmark.py from (repeatable; default: this one)")
    args = parser.parse_args(argv)
    for tree in args.tree:
        if not (tree / "benchmark.py").is_file():
            parser.error(f"--tree: {tree} has no benchmark.py (a checkout of this repository)")
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    trees = args.tree or [REPO]
    seen: Dict[tuple, List[Dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="sweep-startup-") as tmp:
        yamls = {name: Path(tmp) / f"sweep{i}.yaml" for i, name in enumerate(SWEEPS)}
        for name, yaml in yamls.items():
            yaml.write_text(SWEEPS[name])
        for run in range(args.runs):
            for name, yaml in yamls.items():
                for i, tree in enumerate(trees):  # the trees take turns: drift falls on each alike
                    out = Path(tmp) / f"out-{run}-{yaml.stem}-{i}"
                    seen.setdefault((name, str(tree)), []).append(timed_sweep(tree, yaml, out))
    print(f"{args.runs} runs each, medians (min-max), seconds")
    print("| sweep | tree | first row | exit | entries | charts | first row's tok/s |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for (name, tree), runs in seen.items():
        cells = []
        for key in ("first_row_s", "exit_s", "entries_s", "charts_s", "tokens_per_s"):
            values = [r[key] for r in runs]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"| {name} | {tree} | " + " | ".join(cells) + " |")
    for tree in trees:
        default, inproc = (seen[(name, str(tree))] for name in VLLM_PAIR)
        ratios = {key: statistics.median(y[key] / x[key] for x, y in zip(default, inproc))
                  for key in ("exit_s", "tokens_per_s")}
        print(f"{tree}: vLLM multiprocessing false / true, median of paired runs: exit {ratios['exit_s']:.3f}, "
              f"tok/s {ratios['tokens_per_s']:.3f}")
    if len(trees) == 2:
        for name in SWEEPS:
            a, b = (seen[(name, str(t))] for t in trees)
            ratios = {key: statistics.median(y[key] / x[key] for x, y in zip(a, b)) for key in ("first_row_s", "exit_s")}
            print(f"{name}: second tree / first, median of paired runs: first row {ratios['first_row_s']:.3f}, "
                  f"exit {ratios['exit_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

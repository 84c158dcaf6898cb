"""Every engine path against the bare loop of the same engine: one table of ratios with their 95% intervals.

Each path is a script in benchmarks/overhead/ that loads one engine in its own process and alternates the
harness's path with the engine's bare loop, pair by pair, on the same inputs and sampling
(benchmarks/overhead/pairs.py). The ratio is the median of the per-pair ratios harness / bare; the interval is
the median's distribution-free 95% interval. Target: 1.00 +/- 0.01. A verdict says `ok` when the interval lies
within that, `OFF` when it lies wholly outside, `noise` when the interval is wider than the target band (this
machine's noise allows no verdict: the interval says how much), and `edge` when a narrow interval crosses the
target's edge.

    python benchmarks/overhead_all.py [--pairs N] [--only hf-batch vllm-batch ...] [--list]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, NamedTuple, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "overhead"))

from pairs import REPO, TARGET, Figure, parse  # noqa: E402


class OverheadPath(NamedTuple):
    name: str
    script: str
    args: Tuple[str, ...] = ()


PATHS = (
    OverheadPath("hf-batch", "hf_batch.py"),
    OverheadPath("accelerate-batch", "accelerate_batch.py"),
    OverheadPath("deepspeed-tp2-batch", "deepspeed_batch.py"),
    OverheadPath("vllm-batch", "vllm_batch.py"),
    # The harness as the issue found it held to vLLM's own benchmark call, as that benchmark ships (temperature 1.0,
    # unseeded: `sampling.seed: null`), and what per-request seeds (`sampling.seed: 0`) cost over it.
    OverheadPath("vllm-batch-vs-bench", "vllm_batch.py", ("--bare", "bench", "--temperature", "1")),
    OverheadPath("vllm-batch-seeded-vs-bench", "vllm_batch.py", ("--bare", "bench", "--temperature", "1", "--seeded")),
    OverheadPath("hf-stream", "hf_stream.py"),
    OverheadPath("vllm-stream", "vllm_stream.py"),
    # The server on a core of its own and both clients on the other, as make client-capacity runs them: on two shared
    # cores the server under test competed with whichever client ran, and the row swung 0.87-1.20 run to run.
    OverheadPath("openai-stream", "openai_stream.py", ("--pin",)),
    OverheadPath("hf-speculative", "hf_speculative.py"),
    OverheadPath("vllm-speculative", "vllm_speculative.py"),
)


def run_path(path: OverheadPath, pairs: int, logs: Path) -> Tuple[List[Figure], str]:
    """The path's figures, or none and the last lines of its log: a failed path is a row, not the end of the table."""
    command = [sys.executable, str(HERE / "overhead" / path.script), *path.args]
    if pairs:
        command += ["--pairs", str(pairs)]
    log = logs / f"{path.name}.log"
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "w") as err:
        proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    figures = [f for f in map(parse, proc.stdout.splitlines()) if f is not None]
    if proc.returncode != 0 or not figures:
        tail = log.read_text().strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return figures, f"failed (exit {proc.returncode}): {tail[0][:160]}; log: {log}"
    return figures, ""


def row(name: str, f: Figure) -> str:
    interval = f"{f.low:.3f}-{f.high:.3f}" if f.low is not None else "n/a"
    return (f"{name:<27} {f.shape:<30} {f.harness_ms:>10.2f} {f.bare_ms:>9.2f} {f.ratio:>6.3f} {interval:>12} "
            f"{f.verdict:>6}  {f.bare}" + (f" ({f.note})" if f.note else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=0, help="timed pairs per shape (default: each path's own)")
    parser.add_argument("--only", nargs="+", choices=[p.name for p in PATHS], help="these paths only")
    parser.add_argument("--list", action="store_true", help="name the paths and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(f"{p.name}: benchmarks/overhead/{p.script} {' '.join(p.args)}".rstrip() for p in PATHS))
        return 0
    chosen = [p for p in PATHS if not args.only or p.name in args.only]
    logs = Path(tempfile.mkdtemp(prefix="overhead-all-"))
    print(f"target 1.00 +/- {TARGET:.2f}; ratio = median of per-pair ratios harness/bare, interval 95% "
          f"(distribution-free); logs in {logs}")
    print(f"{'path':<27} {'shape':<30} {'harness ms':>10} {'bare ms':>9} {'ratio':>6} {'interval':>12} "
          f"{'verdict':>6}  against", flush=True)
    failed = 0
    for path in chosen:
        start = time.monotonic()
        figures, error = run_path(path, args.pairs, logs)
        for f in figures:
            print(row(path.name, f), flush=True)
        if error:
            failed += 1
            print(f"{path.name:<27} {error}", flush=True)
        print(f"{'':<27} ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The request-stream client's own limit: a null engine that answers at once, driven at 1,000 requests/s.

Each request is answered on the event loop as soon as it is sent (one token, no work), so everything
measured is the harness: how late `harness.scenarios.stream.drive` releases requests after their scheduled
arrival (the send slip). Target: p99 under 1 ms on the 2-core CI machine.

    python benchmarks/overhead_stream.py [--rate 1000] [--requests 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.measure.metrics import request_figures  # noqa: E402
from harness.scenarios.arrivals import arrival_times  # noqa: E402
from harness.scenarios.batch import BatchSpec  # noqa: E402
from harness.scenarios.stream import StreamSpec, Submitted, run_stream  # noqa: E402


async def null_engine(index: int) -> Submitted:
    """One token, handed over on the next turn of the loop, as an engine with nothing to do would."""
    await asyncio.sleep(0)
    now = time.perf_counter()
    return Submitted(first_token_s=now, last_token_s=now, output_tokens=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="requests/s (Poisson arrivals)")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    requests = BatchSpec([[1]] * args.requests, (1,) * args.requests)
    p99s = []
    for seed in range(args.repeats):
        stream = StreamSpec(requests, arrival_times("poisson", args.rate, args.requests, seed))
        timing = run_stream(stream, null_engine)
        slips = np.array([request_figures(r).send_slip_ms for r in timing.requests])
        achieved = args.requests / (timing.end_s - timing.start_s)
        p50, p99 = np.percentile(slips, [50, 99])
        p99s.append(p99)
        print(f"run {seed}: offered {args.rate:g}/s, achieved {achieved:.0f}/s, send slip p50 {p50:.3f} ms, "
              f"p99 {p99:.3f} ms, max {slips.max():.3f} ms")
    print(f"send slip p99 (median of {args.repeats} runs): {np.median(p99s):.3f} ms (target < 1 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

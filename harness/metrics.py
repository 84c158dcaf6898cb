"""Pure functions from timed-batch samples to the per-point numbers of results.csv.

Throughputs use the mean latency (total tokens over total time), not a mean of per-batch
rates, which would over-weight fast batches.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from harness.records import BatchSample
from harness.sweep import SweepPoint

STATS = ("mean", "p50", "p90", "p99", "std")


def describe(values: Sequence[float], name: str) -> Dict[str, Optional[float]]:
    """`{name}_mean`, `_p50`, `_p90`, `_p99`, `_std` (sample std; 0 for one value); all None when empty."""
    if not values:
        return {f"{name}_{s}": None for s in STATS}
    a = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    std = float(a.std(ddof=1)) if len(a) > 1 else 0.0
    return {f"{name}_mean": float(a.mean()), f"{name}_p50": float(p50), f"{name}_p90": float(p90),
            f"{name}_p99": float(p99), f"{name}_std": std}


def summarize(samples: List[BatchSample], point: SweepPoint) -> Dict[str, Optional[float]]:
    """Every metric column of one point; TPOT columns are empty when output_length is 1."""
    latency = describe([s.latency_ms for s in samples], "latency_ms")
    ttft = describe([s.ttft_ms for s in samples], "ttft_ms")
    tpot = describe([s.tpot_ms for s in samples if s.tpot_ms is not None], "tpot_ms")
    requests = [t for s in samples for t in (s.request_ttfts_ms or ())]
    out = {**latency, **ttft, **tpot}
    out.update({k: v for k, v in describe(requests, "request_ttft_ms").items() if not k.endswith("_std")})
    out.update(rates(point, latency["latency_ms_mean"], ttft["ttft_ms_mean"]))
    return out


def rates(point: SweepPoint, latency_ms: Optional[float], ttft_ms: Optional[float]) -> Dict[str, Optional[float]]:
    def per_s(tokens: int, ms: Optional[float]) -> Optional[float]:
        return tokens / ms * 1e3 if ms else None

    return {
        "throughput_tokens_per_s": per_s(point.batch_size * point.output_length, latency_ms),
        "prefill_tokens_per_s": per_s(point.batch_size * point.input_length, ttft_ms),
        "latency_per_output_token_ms": latency_ms / point.output_length if latency_ms is not None else None,
    }

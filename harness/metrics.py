"""Pure functions from timed-batch samples to the per-point numbers of results.csv (docs/measurement.md).

Token counts come from what each batch held and what the engine produced, never from the sweep's
lengths, so a prompt file's mixed lengths and sequences stopped by EOS are counted as they were.
Throughputs are total tokens over total time, not a mean of per-batch rates, which would over-weight
fast batches.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from harness.records import BatchSample

STATS = ("mean", "p50", "p90", "p99", "std")
REQUEST_STATS = ("mean", "p50", "p90", "p99")
REQUEST_METRICS = ("request_ttft_ms", "request_tpot_ms", "request_latency_ms")


def describe(values: Sequence[float], name: str, stats: Sequence[str] = STATS) -> Dict[str, Optional[float]]:
    """`{name}_mean`, `_p50`, `_p90`, `_p99`, `_std` (sample std; 0 for one value); all None when empty."""
    if not len(values):
        return {f"{name}_{s}": None for s in stats}
    a = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    every = {"mean": float(a.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
             "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0}
    return {f"{name}_{s}": every[s] for s in stats}


def summarize(samples: List[BatchSample]) -> Dict[str, Optional[float]]:
    """Every metric column of one point; TPOT columns are empty when no sequence got past its first token."""
    out = {**describe([s.latency_ms for s in samples], "latency_ms"),
           **describe([s.ttft_ms for s in samples], "ttft_ms"),
           **describe([s.tpot_ms for s in samples if s.tpot_ms is not None], "tpot_ms")}
    out.update(token_counts(samples))
    out.update(rates(samples))
    out.update(request_metrics(samples))
    return out


def token_counts(samples: List[BatchSample]) -> Dict[str, Optional[float]]:
    inputs = [n for s in samples for n in s.input_tokens]
    outputs = [n for s in samples for n in s.output_tokens]
    return {"input_tokens_mean": float(np.mean(inputs)), "input_tokens_max": max(inputs),
            "output_tokens_mean": float(np.mean(outputs))}


def rates(samples: List[BatchSample]) -> Dict[str, Optional[float]]:
    """Real tokens (never padding) per second of the timed batches."""
    def per_s(tokens: int, ms: float) -> Optional[float]:
        return tokens / ms * 1e3 if ms > 0 else None

    latency_ms = sum(s.latency_ms for s in samples)
    longest = sum(max(s.output_tokens) for s in samples)  # the steps each batch ran
    return {
        "throughput_tokens_per_s": per_s(sum(sum(s.output_tokens) for s in samples), latency_ms),
        "prefill_tokens_per_s": per_s(sum(sum(s.input_tokens) for s in samples), sum(s.ttft_ms for s in samples)),
        "latency_per_output_token_ms": latency_ms / longest,
    }


def request_metrics(samples: List[BatchSample]) -> Dict[str, Optional[float]]:
    """Per-request figures as vLLM's serving benchmark defines them, pooled over every timed batch's requests."""
    ttfts = [t for s in samples for t in (s.request_ttfts_ms or ())]
    tpots = [t for s in samples for t in s.request_tpots_ms()]
    latencies = [t for s in samples for t in (s.request_latencies_ms or ())]
    out: Dict[str, Optional[float]] = {}
    for name, values in zip(REQUEST_METRICS, (ttfts, tpots, latencies)):
        out.update(describe(values, name, REQUEST_STATS))
    return out

"""Pure functions from timed-batch samples to the per-point numbers of results.csv (docs/measurement.md).

Token counts come from what each batch held and what the engine produced, never from the sweep's
lengths, so a prompt file's mixed lengths and sequences stopped by EOS are counted as they were.
Throughputs are total tokens over total time, not a mean of per-batch rates, which would over-weight
fast batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from harness.measure import stats
from harness.measure.records import SLO, BatchSample, PointResult
from harness.scenarios.batch import SpecCounts
from harness.scenarios.stream import RequestTiming, ServerSeries, StreamTiming

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


def summarize(samples: Sequence[BatchSample]) -> Dict[str, Optional[float]]:
    """Every metric column of one point; TPOT columns are empty when no sequence got past its first token."""
    latencies = [s.latency_ms for s in samples]
    ttfts = [s.ttft_ms for s in samples]
    tpots = [s.tpot_ms for s in samples if s.tpot_ms is not None]
    out = {**describe(latencies, "latency_ms"), **describe(ttfts, "ttft_ms"), **describe(tpots, "tpot_ms")}
    out.update(token_counts(samples))
    out.update(rates(samples))
    out.update(uncertainty(samples, latencies, ttfts, tpots))
    out.update(request_metrics(samples))
    out.update(spec_figures([s.spec for s in samples if s.spec is not None]))
    out.update(energy_figures(samples))
    # A sequence of a static batch gets a token per decode step: its user sees 1 / TPOT (docs/measurement.md).
    tpot_ms = out.get("tpot_ms_mean")
    out["output_tokens_per_s_per_user"] = 1e3 / tpot_ms if tpot_ms else None
    cached = [s.cached_tokens for s in samples if s.cached_tokens is not None]
    if samples and len(cached) == len(samples):  # every batch says: docs/measurement.md, "Shared prefixes"
        prompt = sum(sum(s.input_tokens) for s in samples)
        out["prefix_cache_hit_rate"] = sum(sum(c) for c in cached) / prompt if prompt else None
    return out


CI_METRICS = ("latency_ms", "ttft_ms", "tpot_ms", "throughput_tokens_per_s")
CI_COLUMNS = [f"{m}_ci95_{end}" for m in CI_METRICS for end in ("low", "high")] + ["latency_ms_cv"]


def uncertainty(samples: Sequence[BatchSample], latencies: List[float], ttfts: List[float],
                tpots: List[float]) -> Dict[str, Optional[float]]:
    """95% intervals over the timed batches (harness/measure/stats.py): Student's t for the mean latency, TTFT and TPOT;
    the ratio estimator's for throughput, a ratio of totals. Empty below two batches."""
    intervals = {"latency_ms": stats.mean_interval(latencies), "ttft_ms": stats.mean_interval(ttfts),
                 "tpot_ms": stats.mean_interval(tpots),
                 "throughput_tokens_per_s": stats.ratio_interval([sum(s.output_tokens) for s in samples],
                                                                 [s.latency_ms / 1e3 for s in samples])}
    out: Dict[str, Optional[float]] = {"latency_ms_cv": stats.cv(latencies)}
    for name, interval in intervals.items():
        out[f"{name}_ci95_low"] = interval.low if interval else None
        out[f"{name}_ci95_high"] = interval.high if interval else None
    return out


def energy_figures(samples: Sequence[BatchSample]) -> Dict[str, Optional[float]]:
    """Joules per output token and mean power over the timed batches, where every batch's energy was read."""
    energies = [s.energy_j for s in samples if s.energy_j is not None]
    if not samples or len(energies) < len(samples):
        return {"energy_j_per_output_token": None, "avg_power_w": None, "energy_kwh_per_million_output_tokens": None}
    joules = sum(energies)
    per_token = joules / sum(sum(s.output_tokens) for s in samples)
    return {"energy_j_per_output_token": per_token, "avg_power_w": joules / (sum(s.latency_ms for s in samples) / 1e3),
            "energy_kwh_per_million_output_tokens": per_token * 1e6 / 3.6e6}


SPEC_FIGURES = ("draft_steps", "draft_tokens_proposed", "draft_tokens_accepted", "acceptance_rate",
                "mean_accepted_length")


def spec_figures(counts: Sequence[SpecCounts]) -> Dict[str, Optional[float]]:
    """Speculative decoding over the timed batches or requests: totals, then acceptance = accepted / proposed and
    the mean accepted length = tokens a verifying pass emits (its accepted tokens + the target's own) =
    1 + accepted / draft steps. Nothing for an entry that does not speculate."""
    if not counts:
        return {}
    total = sum(counts, SpecCounts())
    return {
        "draft_steps": total.draft_steps, "draft_tokens_proposed": total.proposed,
        "draft_tokens_accepted": total.accepted,
        "acceptance_rate": total.accepted / total.proposed if total.proposed else None,
        "mean_accepted_length": 1 + total.accepted / total.draft_steps if total.draft_steps else None,
    }


def token_counts(samples: Sequence[BatchSample]) -> Dict[str, Optional[float]]:
    return token_counts_of([n for s in samples for n in s.input_tokens], [n for s in samples for n in s.output_tokens])


def token_counts_of(inputs: Sequence[int], outputs: Sequence[int]) -> Dict[str, Optional[float]]:
    return {"input_tokens_mean": float(np.mean(inputs)), "input_tokens_max": max(inputs),
            "output_tokens_mean": float(np.mean(outputs))}


def rates(samples: Sequence[BatchSample]) -> Dict[str, Optional[float]]:
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


def request_metrics(samples: Sequence[BatchSample]) -> Dict[str, Optional[float]]:
    """Per-request figures as vLLM's serving benchmark defines them, pooled over every timed batch's requests."""
    ttfts = [t for s in samples for t in (s.request_ttfts_ms or ())]
    tpots = [t for s in samples for t in s.request_tpots_ms()]
    latencies = [t for s in samples for t in (s.request_latencies_ms or ())]
    out: Dict[str, Optional[float]] = {}
    for name, values in zip(REQUEST_METRICS, (ttfts, tpots, latencies)):
        out.update(describe(values, name, REQUEST_STATS))
    return out


# --- Request streams (docs/measurement.md, "Request streams") ---------------------------------------------

# Over this p99 send slip the client, not the engine, limits the offered load (the summary warns).
SLIP_WARN_MS = 5.0


@dataclass(frozen=True)
class RequestFigures:
    """One request's latencies, every clock started at its scheduled arrival."""

    ttft_ms: float
    tpot_ms: Optional[float]  # None for a one-token request
    e2e_ms: float
    itl_ms: Tuple[float, ...]
    send_slip_ms: float
    client_wait_ms: float  # released, waiting for a concurrency slot (or a static batch) until sent
    queue_ms: Optional[float]
    ttft_answer_ms: Optional[float] = None  # the answer's first token, after any reasoning streamed apart

    def meets(self, slo: SLO) -> bool:
        return self.ttft_ms <= slo.ttft_ms and (self.tpot_ms is None or self.tpot_ms <= slo.tpot_ms)


def request_figures(r: RequestTiming) -> RequestFigures:
    """A completed request's figures (`r.ok`: both token stamps are there)."""
    assert r.first_token_s is not None and r.last_token_s is not None, "figures of a request that did not complete"
    n = r.output_tokens
    tpot = (r.last_token_s - r.first_token_s) * 1e3 / (n - 1) if n > 1 else None
    return RequestFigures(
        ttft_ms=(r.first_token_s - r.scheduled_s) * 1e3, tpot_ms=tpot, e2e_ms=(r.last_token_s - r.scheduled_s) * 1e3,
        itl_ms=tuple(g * 1e3 for g in r.token_gaps_s), send_slip_ms=(r.dispatched_s - r.scheduled_s) * 1e3,
        client_wait_ms=(r.sent_s - r.dispatched_s) * 1e3, queue_ms=None if r.queued_s is None else r.queued_s * 1e3,
        ttft_answer_ms=None if r.first_answer_token_s is None else (r.first_answer_token_s - r.scheduled_s) * 1e3,
    )


def point_figures(result: PointResult) -> Dict[str, Optional[float]]:
    """Every metric of a finished point: its timed batches' (`summarize`) or its stream's (`summarize_stream`).

    Computed once per point (app/session.py): the annotations of a point read them, and its row is built from them.
    """
    figures: Dict[str, Optional[float]] = {}
    if result.samples:
        figures.update(summarize(result.samples))
    if result.stream is not None and result.status == "ok":
        assert result.slo is not None  # the runner gives every stream point its SLO
        figures.update(summarize_stream(result.stream, result.slo))
    elif result.stream is not None:  # too many requests failed: what failed is known, latencies are not reported
        failed = sum(not r.ok for r in result.stream.requests)
        figures.update(num_requests=len(result.stream.requests), requests_failed=failed)
    throughput = figures.get("throughput_tokens_per_s")
    # Per GPU: every device of the entry, on every node, shares the output (docs/measurement.md).
    figures["output_tokens_per_s_per_gpu"] = throughput / result.context.num_devices if throughput is not None else None
    return figures


def summarize_stream(timing: StreamTiming, slo: SLO) -> Dict[str, Optional[float]]:
    """Every stream column of one point, over its timed requests that completed (the runner has marked the rest
    failed and checked their share: at least one completed).

    The duration is the stream's start (the first request's scheduled arrival) to its last token, as in
    vLLM's serving benchmark; rates and goodput are over it. A failed request counts against SLO attainment (it
    met no target) and toward nothing else.
    """
    requests = [r for r in timing.requests if r.ok]
    figures = [request_figures(r) for r in requests]
    ends = [r.last_token_s for r in requests if r.last_token_s is not None]  # every completed request's
    duration_s = max(ends) - timing.start_s
    met = sum(f.meets(slo) for f in figures)
    pooled = [r.inputs for r in requests if r.inputs is not None]  # embeddings or rerank: no output, answers whole
    out: Dict[str, Optional[float]] = {
        "num_requests": len(timing.requests),
        "requests_failed": len(timing.requests) - len(requests),
        "achieved_request_rate": len(requests) / duration_s,
        "throughput_tokens_per_s": None if pooled else sum(r.output_tokens for r in requests) / duration_s,
        "input_tokens_per_s": sum(r.input_tokens for r in requests) / duration_s,
        "slo_attainment": met / len(timing.requests),
        "goodput": met / duration_s,
        "max_concurrency_reached": max_in_flight(requests),
        "duration_s": duration_s,
    }
    if pooled:  # docs/measurement.md, "Embeddings and rerank": no first token apart from the whole answer
        out.update(inputs_per_s=sum(pooled) / duration_s, inputs_per_request=float(np.mean(pooled)))
    out.update(describe([] if pooled else [f.ttft_ms for f in figures], "ttft_ms"))
    out.update(describe([f.tpot_ms for f in figures if f.tpot_ms is not None], "tpot_ms"))
    out["output_tokens_per_s_per_user"] = per_user_speed(figures)
    out.update(describe([g for f in figures for g in f.itl_ms], "itl_ms"))
    out.update(describe([f.e2e_ms for f in figures], "e2e_ms"))
    slips = [f.send_slip_ms for f in figures]
    out["send_slip_ms_p50"], out["send_slip_ms_p99"] = (float(v) for v in np.percentile(slips, [50, 99]))
    queues = [f.queue_ms for f in figures if f.queue_ms is not None]
    out["queue_ms_mean"] = float(np.mean(queues)) if queues else None
    out.update(token_counts_of([r.input_tokens for r in requests], [r.output_tokens for r in requests]))
    out.update(spec_figures([timing.spec] if timing.spec is not None else []))
    out.update(server_figures(timing.server))
    out["prefix_cache_hit_rate"] = prefix_cache_hit_rate(requests, out.get("server_prefix_cache_hit_rate"))
    checked = [r.answer_valid for r in requests if r.answer_valid is not None]  # completed requests held to a schema
    out["invalid_answer_share"] = checked.count(False) / len(checked) if checked else None
    reasoning = [r.reasoning_tokens for r in requests if r.reasoning_tokens is not None]
    if reasoning:  # a reasoning model's answers, its reasoning streamed apart (docs/measurement.md)
        out["reasoning_tokens_mean"] = float(np.mean(reasoning))
        out.update(describe([f.ttft_answer_ms for f in figures if f.ttft_answer_ms is not None], "ttft_answer_ms",
                            REQUEST_STATS))
    adapters = {r.adapter for r in requests if r.adapter is not None}
    if adapters:  # LoRA: per adapter, the report reads requests.csv (docs/measurement.md, "LoRA adapters")
        out["lora_adapters"] = len(adapters)
    sent = [r.images for r in requests if r.images]
    if sent:  # docs/measurement.md, "Images with the text"
        out["images_per_request"] = float(np.mean([len(images) for images in sent]))
        out["image_pixels_mean"] = float(np.mean([w * h for images in sent for w, h in images]))
    if any(r.turn is not None for r in timing.requests):
        out["num_conversations"] = sum(r.turn == 1 for r in timing.requests)
    return out


def per_user_speed(figures: Sequence[RequestFigures]) -> Optional[float]:
    """The median over requests of each one's output tokens after the first / the time from its first token to its
    last: the speed a user reads at once the answer has started (docs/measurement.md, "Per GPU and per user").
    Requests of one token, or whose tokens all came at once, have no such speed and are left out."""
    speeds = [1e3 / f.tpot_ms for f in figures if f.tpot_ms]
    return float(np.median(speeds)) if speeds else None


def slo_attainment(timing: StreamTiming, slo: SLO) -> float:
    """The share of the stream's requests that met both targets (failed ones met none): the one figure a rate
    search decides on in the worker; the row's `slo_attainment` (summarize_stream) counts the same way."""
    return sum(request_figures(r).meets(slo) for r in timing.requests if r.ok) / len(timing.requests)


def prefix_cache_hit_rate(requests: Sequence[RequestTiming], server_rate: Optional[float]) -> Optional[float]:
    """Share of the prompt tokens served from the prefix cache: from the engine's per-request counts where every
    request has one (vLLM in process; a server's usage.prompt_tokens_details), else the server's own counters over
    the stream, else None (docs/measurement.md, "Shared prefixes")."""
    cached = [r.cached_tokens for r in requests if r.cached_tokens is not None]
    if requests and len(cached) == len(requests):
        prompt = sum(r.input_tokens for r in requests)
        return sum(cached) / prompt if prompt else None
    return server_rate


def server_figures(series: Optional[ServerSeries]) -> Dict[str, Optional[float]]:
    """What the server reported over a stream (docs/measurement.md, "Server metrics"): its gauges' peaks, its
    counters' increase from the scrape before the first request to the one after the last; None where the server
    has no such metric."""
    if series is None or not series.times_s:
        return {}

    def known(name: str) -> List[float]:
        return [v for v in series.values[name] if v is not None]

    def peak(name: str) -> Optional[float]:
        return max(known(name), default=None)

    def increase(name: str) -> Optional[float]:
        values = known(name)
        return values[-1] - values[0] if len(values) >= 2 else None

    hits, queries = increase("prefix_cache_hits"), increase("prefix_cache_queries")
    return {"server_requests_running_max": peak("requests_running"),
            "server_requests_waiting_max": peak("requests_waiting"),
            "server_kv_cache_usage_max": peak("kv_cache_usage"),
            "server_preemptions": increase("preemptions"),
            "server_prefix_cache_hit_rate": hits / queries if hits is not None and queries else None}


def max_in_flight(requests: Sequence[RequestTiming]) -> int:
    """Most requests between reaching the engine (sent) and their last token at any instant."""
    events = sorted([(r.sent_s, 1) for r in requests] + [(r.last_token_s, -1) for r in requests])
    peak = current = 0
    for _, step in events:  # at equal times an end (-1) sorts before a start: touching intervals don't overlap
        current += step
        peak = max(peak, current)
    return peak


def slo_met(attainment: float, slo: SLO) -> bool:
    """A rate counts as sustained when at least the SLO's percentile of its requests met both targets."""
    return attainment * 100 >= slo.percentile - 1e-9

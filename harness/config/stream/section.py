"""The `stream` section of a sweep (`scenario: stream`): arrivals, rates, caps, the SLO and the rate search, with
their checks. Part of the typed config (harness/config/sweep.py), which owns the rest."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

from harness.files import beside_yaml
from harness.errors import UserError
from harness.config.kinds import show
from harness.fields import SEED_MAX, WEEK_S, is_int, is_number, opt
from harness.config.stream.arrival_keys import RampConfig, RateStage, validate_shape
from harness.config.stream.traces import FORMATS, Trace, read_trace, windowed

ARRIVALS = ("poisson", "gamma", "constant", "ramp", "stages", "burst", "trace")
# `stream.release`'s values, the default first: the best measured (harness/scenarios/release.py implements them).
RELEASE_POLICIES = ("timerfd", "timer", "spin")


@dataclass
class SLOConfig:
    """Defaults as MLPerf Inference's llama2-70b server scenario."""

    ttft_ms: float = opt(
        2000.0, gt=0, unit="ms", help="Time to first token a request may take, from its scheduled arrival.")
    tpot_ms: float = opt(200.0, gt=0, unit="ms", help="Time per output token after the first a request may take.")
    percentile: float = opt(
        99.0, gt=0, le=100, unit="%", help="Share of requests (in %) that must meet both for a rate to count as "
                            "sustained.")


@dataclass
class RateSearchConfig:
    """`request_rates: auto`: double from start_rate until the SLO fails, then bisect."""

    start_rate: float = opt(1.0, gt=0, unit="requests/s", help="First rate probed, requests/s.")
    precision: float = opt(
        0.1, gt=0, lt=1, help="Stop when the lowest failed rate is within this share above the highest "
                           "sustained one.")
    max_probes: int = opt(16, ge=2, help="Most rates probed per point (each is a full stream of num_requests).")


@dataclass
class TraceWindow:
    """Which part of a trace is replayed, in the trace's own seconds from its first request."""

    start_s: float = opt(
        0.0, ge=0, unit="seconds", help="Replay from this many seconds after the trace's first request.")
    duration_s: Optional[float] = opt(
        None, gt=0, unit="seconds", help="Replay this many seconds of the trace (null: to its end).")
    max_requests: Optional[int] = opt(
        None, ge=1, help="Replay at most this many requests (null: every one in the window).")


@dataclass
class StreamConfig:
    """`scenario: stream`: requests arrive over time; each engine batches them its own way."""

    arrival: str = opt("poisson", help="poisson (exponential gaps) | gamma (gamma gaps, see burstiness) | constant "
                       "(evenly spaced) | ramp (Poisson, its rate rising linearly to the point's rate, see ramp) | "
                       "stages (Poisson at piecewise-constant rates, see stages; request_rates and num_requests "
                       "ignored) | burst (every request at t=0: offline throughput; request_rates ignored) | trace (the times and lengths of "
                       "stream.trace; request_rates and num_requests ignored, and input_lengths and output_lengths not given).")
    burstiness: float = opt(
        1.0, gt=0, help="With arrival: gamma, the gaps' gamma shape (more than 0): the coefficient of "
                            "variation of the gaps is 1/sqrt(burstiness); 1 is Poisson, smaller is burstier (as vLLM's "
                            "bench serve --burstiness).")
    ramp: RampConfig = opt(factory=RampConfig, help="With arrival: ramp, how the rate reaches each point's rate.")
    stages: List[RateStage] = opt(
        factory=list, help="With arrival: stages, a list of {rate, duration_s}: Poisson arrivals at each rate in turn. "
        "The timed stream is every arrival before the last stage ends (num_requests and request_rates ignored; the "
        "row's request_rate is the schedule's mean rate); warm-up requests follow the same schedule."
    )
    trace: Optional[str] = opt(None, help="With arrival: trace, the trace file to replay (Azure LLM inference CSV, "
                               "Mooncake/aiperf JSONL, BurstGPT CSV).")
    trace_format: str = opt("auto", help="auto (from the suffix and header) | azure | mooncake | burstgpt.")
    time_scale: float = opt(1.0, gt=0, help="Multiplies the trace's gaps: 0.5 replays it twice as fast.")
    window: TraceWindow = opt(factory=TraceWindow, help="The part of the trace replayed.")
    # Any: a list or one value; `validate` turns both into lists.
    request_rates: Any = opt(factory=lambda: [1.0, 2.0, 4.0, 8.0],
                             help="Offered requests per second, one point each (a list or one number), or `auto`: "
                             "search for the highest rate within the SLO (see `search`).")
    max_concurrency: Any = opt(
        None, help="Cap on requests in flight (null: no cap), or a list of caps, one point each; waiting for a "
        "slot counts as latency."
    )
    num_requests: int = opt(
        200, ge=1, help="Timed requests per point, after the warm-up requests (with duration_s: the "
                            "most scheduled).")
    duration_s: Optional[float] = opt(
        None, gt=0, le=WEEK_S, unit="seconds", help="Ends each point's timed requests by time: only requests due "
                                                    "within this many seconds of the "
        "stream's start are sent, those in flight then run to their end (null: every one of num_requests). Not with "
        "arrival: burst or trace."
    )
    num_warmup_requests: int = opt(10, ge=0, help="Requests sent (and finished) before the timed ones, untimed.")
    seed: int = opt(0, ge=0, le=SEED_MAX, help="Seeds the arrival times: identical for every backend.")
    max_failed_share: float = opt(
        0.0, ge=0, lt=1, help="Share of a point's requests that may fail (an error answer, a dropped or stalled "
                              "connection, a "
        "wrong token count) with the point still ok: they are counted (requests_failed), kept in requests.csv with "
        "their error, and left out of the latencies. 0: any failure makes the point an error."
    )
    saturation_margin: float = opt(
        0.1, ge=0, lt=1, help="A point is saturated when its requests completed more than this share slower than they "
                              "were offered "
        "while the requests in flight kept rising (0.1: 10%)."
    )
    stop_at_saturation: bool = opt(True, help="In a rate sweep, skip the higher rates at the same lengths and cap once "
                                   "one saturated; a rate search treats a saturated probe as missed.")
    release: str = opt(
        RELEASE_POLICIES[0], help="How the client waits for each request's time. timerfd: a kernel timer, on time to "
        "within the kernel's wake-up (about 0.2-0.4 ms p99 at 1,000 requests/s) with no CPU spent between requests; "
        "where the kernel has none, asyncio's timer (the manifest's stream_release says which ran) | timer: asyncio's "
        "own timer, up to about a millisecond late, as other clients wait (to compare with them) | spin: woken about "
        "2 ms early, then yields to the event loop until due: the most precise where a core is free, but it burns "
        "one, slowing an engine that computes on the same CPU. HF static batching waits in its own thread, whatever "
        "this says."
    )
    slo: SLOConfig = opt(factory=SLOConfig, help="Latency targets for SLO attainment and goodput.")
    search: RateSearchConfig = opt(factory=RateSearchConfig, help="How `request_rates: auto` searches.")

    def resolve_paths(self, config_dir: Path) -> None:
        """A relative trace path is looked for beside the YAML first, then from the working directory."""
        self.trace = beside_yaml(config_dir, self.trace)


def validate_stream(stream: StreamConfig) -> None:
    """Value checks of the `stream` section; rates and caps become lists, and a trace is read and windowed."""
    if stream.arrival not in ARRIVALS:
        raise UserError(f"stream.arrival: {stream.arrival!r} is not one of {', '.join(ARRIVALS)}")
    if stream.release not in RELEASE_POLICIES:
        raise UserError(f"stream.release: {stream.release!r} is not one of {', '.join(RELEASE_POLICIES)}")
    validate_shape(stream)
    _validate_trace(stream)
    if stream.request_rates == "auto":
        _validate_search(stream)
    else:
        if stream.search != RateSearchConfig():
            raise UserError("stream.search: is how request_rates: auto searches; set stream.request_rates: auto, or "
                            "remove stream.search")
        stream.request_rates = _rates(stream.request_rates)
    caps = stream.max_concurrency if isinstance(stream.max_concurrency, list) else [stream.max_concurrency]
    if not caps or any(c is not None and (not is_int(c) or c < 1) for c in caps):
        raise UserError(f"stream.max_concurrency: must be null (no cap) or positive integers, a list or one, got "
                        f"{stream.max_concurrency!r}")
    if len(set(caps)) != len(caps):
        raise UserError(f"stream.max_concurrency: has duplicates: {caps}")
    stream.max_concurrency = caps
    _validate_bounds(stream)


def _validate_bounds(stream: StreamConfig) -> None:
    """stream.duration_s belongs to the arrivals it bounds in time."""
    if stream.duration_s is not None:
        if stream.arrival in ("burst", "trace"):
            raise UserError(f"stream.duration_s: bounds a stream's arrivals in time; arrival: {stream.arrival} "
                            + ("sends every request at t=0" if stream.arrival == "burst"
                               else "is bounded by stream.window.duration_s"))


def _rates(value: Any) -> List[float]:
    rates = value if isinstance(value, list) else [value]
    if not rates or any(not is_number(r) or not 0 < r < math.inf for r in rates):
        raise UserError(f"stream.request_rates: must be finite numbers of requests/s > 0, a list or one, or auto "
                        f"(every request at once: stream.arrival: burst), got {show(value)}")
    if len(set(rates)) != len(rates):
        raise UserError(f"stream.request_rates: has duplicates: {rates}")
    return [float(r) for r in rates]


def _validate_search(stream: StreamConfig) -> None:
    if stream.arrival == "burst":
        raise UserError("stream.request_rates: auto searches over rates; stream.arrival: burst has none (use poisson "
                        "or constant)")


def _validate_trace(stream: StreamConfig) -> None:
    if stream.trace_format not in ("auto", *FORMATS):
        raise UserError(f"stream.trace_format: {stream.trace_format!r} is not one of auto, {', '.join(FORMATS)}")
    if stream.arrival != "trace":
        given = [key for key, value, default in (("trace", stream.trace, None), ("trace_format", stream.trace_format,
                 "auto"), ("time_scale", stream.time_scale, 1.0), ("window", stream.window, TraceWindow()))
                 if value != default]
        if given:
            raise UserError(f"stream.{given[0]}: is read with stream.arrival: trace; set it, or remove "
                            f"stream.{given[0]}")
        return
    if stream.trace is None:
        raise UserError("stream.trace: required with stream.arrival: trace (a path to an Azure, Mooncake or "
                        "BurstGPT trace)")
    # The trace's own times replace rates (one point per cap): the point's rate is the one its window offers. A bad
    # file or an empty window stops the run here.
    replay = replay_trace(stream)
    if len(replay.requests) < 2 or replay.span_s <= 0:
        raise UserError(f"stream.trace: {stream.trace}: the replay holds {len(replay.requests)} request(s) over "
                        f"{replay.span_s:g} s; its rate is their count over their span, so it needs at least 2 "
                        f"requests "
                        "over more than 0 s (check stream.window)")
    stream.request_rates = [replay.offered_rate]


def replay_trace(stream: StreamConfig) -> Trace:
    """The requests `stream` replays: its trace's window, time-scaled (the file is read once per process)."""
    # Only a stream with arrival: trace is replayed, and validate_stream requires its trace.
    assert stream.trace is not None, "stream.trace: required with stream.arrival: trace"
    w = stream.window
    return windowed(read_trace(Path(stream.trace), stream.trace_format), w.start_s, w.duration_s, w.max_requests,
                    stream.time_scale)

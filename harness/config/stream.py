"""The `stream` section of a sweep (`scenario: stream`): arrivals, rates, caps, the SLO and the rate search, with
their checks. Part of the typed config (harness/config/sweep.py), which owns the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

from harness.errors import UserError
from harness.fields import is_int, opt

ARRIVALS = ("poisson", "constant", "burst")


@dataclass
class SLOConfig:
    """Defaults as MLPerf Inference's llama2-70b server scenario."""

    ttft_ms: float = opt(2000.0, help="Time to first token a request may take, from its scheduled arrival.")
    tpot_ms: float = opt(200.0, help="Time per output token after the first a request may take.")
    percentile: float = opt(99.0, help="Share of requests (in %) that must meet both for a rate to count as "
                            "sustained.")


@dataclass
class RateSearchConfig:
    """`request_rates: auto`: double from start_rate until the SLO fails, then bisect."""

    start_rate: float = opt(1.0, help="First rate probed, requests/s.")
    precision: float = opt(0.1, help="Stop when the lowest failed rate is within this share above the highest "
                           "sustained one.")
    max_probes: int = opt(16, help="Most rates probed per point (each is a full stream of num_requests).")


@dataclass
class StreamConfig:
    """`scenario: stream`: requests arrive over time; each engine batches them its own way."""

    arrival: str = opt("poisson", help="poisson (exponential gaps) | constant (evenly spaced) | burst (every "
                       "request at t=0: offline throughput; request_rates ignored).")
    # Any: a list or one value; `validate` turns both into lists.
    request_rates: Any = opt(factory=lambda: [1.0, 2.0, 4.0, 8.0],
                             help="Offered requests per second, one point each (a list or one number), or `auto`: "
                             "search for the highest rate within the SLO (see `search`).")
    max_concurrency: Any = opt(
        None, help="Cap on requests in flight (null: no cap), or a list of caps, one point each; waiting for a "
        "slot counts as latency."
    )
    num_requests: int = opt(200, help="Timed requests per point, after the warm-up requests.")
    num_warmup_requests: int = opt(10, help="Requests sent (and finished) before the timed ones, untimed.")
    seed: int = opt(0, help="Seeds the arrival times: identical for every backend.")
    max_failed_share: float = opt(
        0.0, help="Share of a point's requests that may fail (an error answer, a dropped or stalled connection, a "
        "wrong token count) with the point still ok: they are counted (requests_failed), kept in requests.csv with "
        "their error, and left out of the latencies. 0: any failure makes the point an error."
    )
    slo: SLOConfig = opt(factory=SLOConfig, help="Latency targets for SLO attainment and goodput.")
    search: RateSearchConfig = opt(factory=RateSearchConfig, help="How `request_rates: auto` searches.")


def validate_stream(stream: StreamConfig) -> None:
    """Value checks of the `stream` section; rates and caps become lists."""
    if stream.arrival not in ARRIVALS:
        raise UserError(f"stream.arrival: {stream.arrival!r} is not one of {', '.join(ARRIVALS)}")
    if stream.request_rates == "auto":
        _validate_search(stream)
    else:
        stream.request_rates = _rates(stream.request_rates)
    caps = stream.max_concurrency if isinstance(stream.max_concurrency, list) else [stream.max_concurrency]
    if not caps or any(c is not None and (not is_int(c) or c < 1) for c in caps):
        raise UserError(f"stream.max_concurrency: must be null (no cap) or positive integers, a list or one, got "
                        f"{stream.max_concurrency!r}")
    if len(set(caps)) != len(caps):
        raise UserError(f"stream.max_concurrency: has duplicates: {caps}")
    stream.max_concurrency = caps
    if stream.num_requests < 1:
        raise UserError(f"stream.num_requests: must be at least 1, got {stream.num_requests}")
    if stream.num_warmup_requests < 0:
        raise UserError(f"stream.num_warmup_requests: must be 0 or more, got {stream.num_warmup_requests}")
    if not 0 <= stream.max_failed_share < 1:
        raise UserError(f"stream.max_failed_share: must be in [0, 1) (a share of the requests), got "
                        f"{stream.max_failed_share}")
    slo = stream.slo
    for key in ("ttft_ms", "tpot_ms"):
        if getattr(slo, key) <= 0:
            raise UserError(f"stream.slo.{key}: must be more than 0 ms, got {getattr(slo, key)}")
    if not 0 < slo.percentile <= 100:
        raise UserError(f"stream.slo.percentile: must be in (0, 100], got {slo.percentile}")


def _rates(value: Any) -> List[float]:
    rates = value if isinstance(value, list) else [value]
    if not rates or any(isinstance(r, bool) or not isinstance(r, (int, float)) or r <= 0 for r in rates):
        raise UserError(f"stream.request_rates: must be positive numbers (requests/s), a list or one, or auto, got "
                        f"{value!r}")
    if len(set(rates)) != len(rates):
        raise UserError(f"stream.request_rates: has duplicates: {rates}")
    return [float(r) for r in rates]


def _validate_search(stream: StreamConfig) -> None:
    search = stream.search
    if stream.arrival == "burst":
        raise UserError("stream.request_rates: auto searches over rates; stream.arrival: burst has none (use poisson "
                        "or constant)")
    if search.start_rate <= 0:
        raise UserError(f"stream.search.start_rate: must be more than 0 requests/s, got {search.start_rate}")
    if not 0 < search.precision < 1:
        raise UserError(f"stream.search.precision: must be in (0, 1), got {search.precision}")
    if search.max_probes < 2:
        raise UserError(f"stream.search.max_probes: must be at least 2, got {search.max_probes}")

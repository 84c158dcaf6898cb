"""benchmarks/client_capacity.py's rule, apart from its clients: a rate is kept by most of its probes, the search
doubles then bisects, and a client's figure is the median of whole searches (issue 50: one probe decided the
published figure when the search stopped at its first miss)."""

import statistics
from typing import Any, Callable, Dict, List

SLIP_LIMIT_MS = 1.0
MIN_REQUESTS = 500


def decide(probe: Callable[[], dict], repeats: int, say: Callable[[dict], None]) -> bool:
    """Whether a rate is kept: probed until most of `repeats` probes agree (two of three: the third only when the
    first two disagree), kept when most of them kept it."""
    majority = repeats // 2 + 1
    kept = missed = 0
    while kept < majority and missed < majority:
        result = probe()
        say(result)
        kept, missed = kept + bool(result["kept"]), missed + (not result["kept"])
    return kept >= majority


def search(probe: Callable[[float], dict], start_rate: float, bisect: int, repeats: int,
           say: Callable[[float, dict], None]) -> float:
    """Double until a rate is not kept (or halve until one is), then bisect; the highest kept rate, 0 if none.
    `probe(rate)` runs one probe; `decide` rules on each rate."""
    kept, failed, rate, bisected = 0.0, None, start_rate, 0
    while bisected <= bisect and rate >= 1:
        if decide(lambda: probe(rate), repeats, lambda result: say(rate, result)):
            kept = rate
        else:
            failed = rate
        if failed is None:
            rate *= 2
        elif not kept:
            rate /= 2
        else:
            rate, bisected = (kept + failed) / 2, bisected + 1
    return kept


def summary(found: Dict[str, List[float]]) -> List[str]:
    """Each client's kept rate per run, their median and range; the ratio of the first client's median to the
    second's."""
    lines = []
    for name, rates in found.items():
        each = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"{name}: highest rate kept on one core: median {statistics.median(rates):,.0f} requests/s "
                     f"(range {min(rates):,.0f}-{max(rates):,.0f} over {len(rates)} runs: {each})")
    if len(found) == 2:
        (a, ra), (b, rb) = found.items()
        if statistics.median(rb):
            lines.append(f"ratio {a} / {b} at the medians: {statistics.median(ra) / statistics.median(rb):.1f}x")
    return lines


def tail(clients: Dict[str, Any], rates: List[float], probes: int, seconds: float) -> List[str]:
    """Fixed-rate probes, `probes` of each client at each rate, alternated client by client: the spread of the p99
    send slip from probe to probe, how many probes kept the rate, and the share of requests 1 ms late or more."""
    lines = []
    for rate in rates:
        n = max(MIN_REQUESTS, int(rate * seconds))
        results: Dict[str, List[dict]] = {name: [] for name in clients}
        for _ in range(probes):
            for name, client in clients.items():
                results[name].append(client.probe(rate, n))
        for name, runs in results.items():
            p99 = sorted(r["slip_p99_ms"] for r in runs)
            late = [r.get("late_share", float("nan")) for r in runs]
            lines.append(f"{rate:>7g}/s  {name:<44} p99 slip {p99[0]:.3f} / {statistics.median(p99):.3f} / "
                         f"{p99[-1]:.3f} ms (min / median / max of {len(runs)})  kept {sum(r['kept'] for r in runs)}"
                         f"/{len(runs)}  late >= 1 ms: median {statistics.median(late):.2%}, max {max(late):.2%}; "
                         f"worst send {max(r.get('slip_max_ms', float('nan')) for r in runs):.2f} ms late")
            print(lines[-1], flush=True)
    return lines

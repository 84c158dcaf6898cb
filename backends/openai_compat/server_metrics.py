"""The server's own view of a stream: its Prometheus endpoint scraped at a fixed interval while the stream runs.

What a client cannot see: how many requests the server runs and queues, how full its KV cache is, how often it
preempts, how often its prefix cache hits. The names differ by server; each series takes the first name the
server exposes (labels summed over, e.g. vLLM's per-engine series). Scraping runs on a thread of its own, so the
event loop that sends the requests never waits for it; only the lines of known names are parsed, which keeps
each scrape to about a millisecond of CPU.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from typing import Dict, List, Optional, Tuple

from harness.scenarios.stream import SERVER_SERIES, ServerSeries

# Series -> metric names, first found wins: vLLM (v1), vLLM (older), SGLang, TGI. kv_cache_usage is a fraction.
METRIC_NAMES: Dict[str, Tuple[str, ...]] = {
    "requests_running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size"),
    "requests_waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size"),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "preemptions": ("vllm:num_preemptions_total",),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total",),
}
assert tuple(METRIC_NAMES) == SERVER_SERIES
_WANTED = tuple(name for names in METRIC_NAMES.values() for name in names)


def parse(text: str) -> Dict[str, float]:
    """Each known metric's value, summed over its label sets, from Prometheus' text format."""
    totals: Dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(_WANTED):
            continue
        name_part, _, rest = line.partition(" ") if "{" not in line else line.partition("} ")
        name = name_part.split("{", 1)[0]
        if name not in _WANTED:
            continue  # a longer name sharing the prefix (vllm:num_requests_waiting_by_reason)
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        totals[name] = totals.get(name, 0.0) + value
    return totals


def series_values(totals: Dict[str, float]) -> Dict[str, Optional[float]]:
    return {series: next((totals[n] for n in names if n in totals), None) for series, names in METRIC_NAMES.items()}


def probe(url: str, headers: Dict[str, str]) -> Optional[str]:
    """None when `url` serves metrics the harness knows; else why nothing will be scraped, in a few words."""
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return f"GET {url} answered HTTP {e.code}: no server metrics"
    except (OSError, ValueError) as e:
        return f"GET {url} failed ({' '.join(str(getattr(e, 'reason', e)).split())}): no server metrics"
    if not parse(text):
        return f"GET {url} has none of the known metrics (vLLM, SGLang, TGI): no server metrics"
    return None


class Scraper:
    """GET `url` every `interval_s` from `start()` to `stop()`, on a daemon thread, then `series()`."""

    def __init__(self, url: str, headers: Dict[str, str], interval_s: float):
        self.url, self.headers, self.interval_s = url, headers, interval_s
        self._times: List[float] = []
        self._values: List[Dict[str, Optional[float]]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """The first scrape here, before the stream starts (the counters' baseline), then the thread."""
        self._scrape()
        self._thread = threading.Thread(target=self._run, name="server-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._scrape()  # the state at the end, counters included

    def series(self, start_s: float) -> ServerSeries:
        """What was scraped, with times from `start_s` (the stream's start, perf_counter)."""
        return ServerSeries(tuple(t - start_s for t in self._times),
                            {name: tuple(v[name] for v in self._values) for name in SERVER_SERIES})

    def _run(self) -> None:
        next_s = time.perf_counter() + self.interval_s
        while not self._stop.wait(max(0.0, next_s - time.perf_counter())):
            self._scrape()
            next_s += self.interval_s

    def _scrape(self) -> None:
        sent_s = time.perf_counter()
        try:
            request = urllib.request.Request(self.url, headers=self.headers)
            with urllib.request.urlopen(request, timeout=max(1.0, self.interval_s)) as response:
                text = response.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return  # a missed scrape is a gap in the series, not a failed point
        # The server read its gauges somewhere between sending and answering: the middle is the best guess.
        self._times.append((sent_s + time.perf_counter()) / 2)
        self._values.append(series_values(parse(text)))

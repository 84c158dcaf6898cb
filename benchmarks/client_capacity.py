"""Client capacity: the highest request rate a client offers on time, on one core, against a load sink.

A benchmark client that cannot keep its schedule offers less load than it reports, and its latencies carry its
own lateness. This finds, for the harness's `openai` backend and for aiperf 0.13 (`make agree-clients` installs it
in .venv-aiperf), the highest constant request rate at which
- the p99 send slip is under 1 ms: request i leaves at most 1 ms after the first one's send time + i / rate, and
- the achieved send rate, (n - 1) / (last send - first send), is within 1% of the offered rate,
with every request answered. Both clients are measured the same way: the harness's send is `sent_s` (its HTTP
request is being written), aiperf's is `request_start_ns` from its per-request export. The harness runs as a user's
sweep runs it: `OpenAIBackend` with its option defaults, its requests released by `stream.release`'s default policy
(a kernel timer, harness/scenarios/release.py; the header line names the policy and the mechanism), no setting forced
for the benchmark. --release compares another policy (`--clients ours --release spin`: the yielding spin).

The load sink is scripts/loopback_server.py with --token-gap-ms 0: a loopback completions server that answers every
request at once (8 tokens, one per SSE chunk, usage, [DONE]). It is not a server to measure, only what lets a
client's own limit show; it runs pinned to one core, the client to the other. The search doubles from
--start-rate until a rate fails, then bisects --bisect times; each probe is --seconds of requests (at least 500).

One probe decides nothing: any single probe, at any rate, can miss on one late wake-up of the client (a p99 over
1 ms at 125/s in a run whose 2,000/s probes kept it). So each rate is probed up to --repeats times (3) and is kept
when most of its probes are (two of three; the third runs only when the first two disagree), and the whole search
runs --runs times (5): each client's figure is the median of its runs' kept rates, printed with their range.

    python benchmarks/client_capacity.py [--runs 5] [--repeats 3] [--start-rate 125] [--seconds 2] [--bisect 4]
                                         [--clients ours,aiperf] [--release timerfd|timer|spin]
"""

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agree_clients import aiperf_executable  # noqa: E402
from cli_types import positive  # noqa: E402
from capacity_search import MIN_REQUESTS, SLIP_LIMIT_MS, search, summary, tail  # noqa: E402
from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions  # noqa: E402
from harness.config.sections import ModelConfig  # noqa: E402
from harness.model.spec import PRESETS_DIR, resolve_model  # noqa: E402
from harness.plan.points import SweepShape  # noqa: E402
from harness.run.process_group import free_port  # noqa: E402
from harness.scenarios.arrivals import arrival_times  # noqa: E402
from harness.scenarios.batch import BatchSpec  # noqa: E402
from harness.scenarios.release import DEFAULT_POLICY, POLICIES, ReleaseClock, mechanism  # noqa: E402
from harness.scenarios.stream import StreamSpec  # noqa: E402

INPUT_LEN, OUTPUT_LEN = 64, 8
RATE_TOLERANCE = 0.01
CLIENT_CORE, SINK_CORE = 0, 1


def verdict(sends_s, rate: float) -> dict:
    """p99 send slip (ms) against the schedule anchored at the first send, and the achieved send rate."""
    sends = np.sort(np.asarray(sends_s, dtype=float))
    slips_ms = (sends - (sends[0] + np.arange(len(sends)) / rate)) * 1e3
    achieved = (len(sends) - 1) / (sends[-1] - sends[0])
    slip = float(np.percentile(slips_ms, 99))
    return {"slip_p99_ms": slip, "achieved": achieved, "slip_max_ms": float(slips_ms.max()),
            "late_share": float(np.mean(slips_ms >= SLIP_LIMIT_MS)),
            "kept": slip < SLIP_LIMIT_MS and abs(achieved / rate - 1) <= RATE_TOLERANCE}


class Bare:
    """The release alone: one task per request waits on the harness's ReleaseClock for its due time and stamps it,
    with nothing sent and nothing read. What is late here is late before the client does any work of its own: the
    kernel's wake-up, the loop's turn, the VM's scheduling of this core."""

    def __init__(self, release: str):
        self.release = release
        self.name = f"bare release loop ({release}, no requests)"

    def probe(self, rate: float, n: int) -> dict:
        async def stamps() -> List[float]:
            clock = ReleaseClock(asyncio.get_running_loop(), self.release)
            start, sends = time.perf_counter() + 0.05, [0.0] * n

            async def release(i: int) -> None:
                await clock.until(start + i / rate)
                sends[i] = time.perf_counter()
            try:
                await asyncio.gather(*(release(i) for i in range(n)))
            finally:
                clock.close()
            return sends
        return verdict(asyncio.run(stamps()), rate)

    def close(self) -> None:
        pass


class Ours:
    name = "harness (openai backend)"

    def __init__(self, url: str, release: str):
        self.release = release
        model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
        # Option defaults as a user's YAML gets them (the sink has no /metrics: the probe finds none, as for any
        # server without it).
        options = OpenAIOptions(name="openai", base_url=url, model="sink")
        options.validate("backend")
        self.backend = OpenAIBackend(options, model, SweepShape(0, INPUT_LEN, OUTPUT_LEN, scenario="stream"))
        self.backend.load()
        self.backend.serve(self._stream(200, 100.0))  # warm-up: connections, imports

    def _stream(self, n: int, rate: float) -> StreamSpec:
        prompts = np.random.default_rng(0).integers(3, 3000, size=(n, INPUT_LEN)).tolist()
        return StreamSpec(BatchSpec(prompts, (OUTPUT_LEN,) * n), arrival_times("constant", rate, n, 0),
                          release=self.release)

    def probe(self, rate: float, n: int) -> dict:
        timing = self.backend.serve(self._stream(n, rate))
        failed = [r for r in timing.requests if not r.ok]
        if failed:
            return {"slip_p99_ms": float("nan"), "achieved": 0.0, "kept": False,
                    "note": f"{len(failed)} failed: {failed[0].error}"}
        return verdict([r.sent_s for r in timing.requests], rate)

    def close(self) -> None:
        self.backend.close()


class Aiperf:
    name = "aiperf 0.13"

    def __init__(self, url: str):
        self.url, self.exe = url, aiperf_executable()

    def probe(self, rate: float, n: int) -> dict:
        with tempfile.TemporaryDirectory(prefix="capacity-aiperf-") as tmp:
            argv = [str(self.exe), "profile", "--model", "sink", "--url", self.url, "--endpoint-type", "completions",
                    "--streaming", "--tokenizer", str(PRESETS_DIR / "tiny-llama"),
                    "--synthetic-input-tokens-mean", str(INPUT_LEN), "--synthetic-input-tokens-stddev", "0",
                    "--output-tokens-mean", str(OUTPUT_LEN), "--output-tokens-stddev", "0",
                    "--request-rate", f"{rate:g}", "--request-rate-mode", "constant", "--request-count", str(n),
                    "--random-seed", "0", "--use-server-token-count", "--artifact-dir", tmp, "--ui-type", "none",
                    "--no-server-metrics", "--no-gpu-telemetry"]
            env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
            done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True,
                                  preexec_fn=lambda: os.sched_setaffinity(0, {CLIENT_CORE}))
            if done.returncode != 0:
                return {"slip_p99_ms": float("nan"), "achieved": 0.0, "kept": False,
                        "note": f"exit {done.returncode}: {' '.join(done.stderr[-300:].split())}"}
            records = [json.loads(line) for line in open(Path(tmp) / "profile_export.jsonl")]
        ok = [r for r in records if not r.get("error")]
        if len(ok) != n:
            return {"slip_p99_ms": float("nan"), "achieved": 0.0, "kept": False, "note": f"{len(ok)} of {n} ok"}
        return verdict([r["metadata"]["request_start_ns"] / 1e9 for r in ok], rate)

    def close(self) -> None:
        pass


def say_probe(rate: float, n: int, result: dict) -> None:
    print(f"  {rate:>8.0f}/s  {n:>6} requests  slip p99 {result['slip_p99_ms']:>8.3f} ms  achieved "
          f"{result['achieved']:>8.1f}/s  {'kept' if result['kept'] else 'not kept'} {result.get('note', '')}",
          flush=True)


def start_sink() -> tuple:
    port = free_port()
    sink = subprocess.Popen([sys.executable, str(REPO / "scripts" / "loopback_server.py"), "--port", str(port),
                             "--token-gap-ms", "0"], preexec_fn=lambda: os.sched_setaffinity(0, {SINK_CORE}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return sink, url
        except OSError:
            if time.monotonic() > deadline or sink.poll() is not None:
                sink.kill()
                raise SystemExit("the load sink did not start") from None
            time.sleep(0.1)


def rates_list(text: str) -> List[float]:
    return [positive(float, 1)(part) for part in text.split(",")]


def odd(text: str) -> int:
    value = positive(int, 1)(text)
    if value % 2 == 0:
        raise argparse.ArgumentTypeError(f"must be odd (a majority decides), got {text!r}")
    return value


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive(int, 1), default=5, help="whole searches per client")
    parser.add_argument("--repeats", type=odd, default=3, help="probes a rate may take; most of them decide")
    parser.add_argument("--start-rate", type=positive(float, 1), default=125.0)
    parser.add_argument("--seconds", type=positive(float, 0.1), default=2.0, help="length of each probe's stream")
    parser.add_argument("--bisect", type=positive(int, 0), default=4, help="bisection steps after the first failed rate")
    parser.add_argument("--clients", default="ours,aiperf")
    parser.add_argument("--release", choices=POLICIES, default=DEFAULT_POLICY,
                        help="how the harness waits for each request's time (stream.release)")
    parser.add_argument("--tail", type=rates_list, metavar="RATE,RATE,...",
                        help="instead of the search: --probes fixed-rate probes at each rate, of the bare release loop "
                             "and of the harness, and the spread of their p99 send slip")
    parser.add_argument("--probes", type=positive(int, 1), default=8, help="probes per client and rate for --tail")
    args = parser.parse_args(argv)
    unknown = [name for name in args.clients.split(",") if name not in CLIENTS]
    if unknown or not args.clients:
        parser.error(f"--clients: {','.join(unknown) or '(none)'}: not one of {', '.join(CLIENTS)}")
    return args


CLIENTS = ("ours", "aiperf")


def capacity(args: argparse.Namespace, url: str) -> None:
    """The search, --runs times for each client; each client's median kept rate with its range."""
    print(f"kept: p99 send slip < {SLIP_LIMIT_MS:g} ms and achieved rate within {RATE_TOLERANCE:.0%} of offered, in "
          f"most of up to {args.repeats} probes; {args.runs} runs", flush=True)
    found: Dict[str, List[float]] = {}
    makers = {"ours": lambda: Ours(url, args.release), "aiperf": lambda: Aiperf(url)}
    size = lambda rate: max(MIN_REQUESTS, int(rate * args.seconds))  # noqa: E731
    for name in args.clients.split(","):
        client = makers[name]()
        try:
            for run in range(1, args.runs + 1):
                print(f"{client.name}, run {run} of {args.runs}:", flush=True)
                rate = search(lambda r: client.probe(r, size(r)), args.start_rate, args.bisect, args.repeats,
                              lambda r, result: say_probe(r, size(r), result))
                print(f"  kept: {rate:,.0f} requests/s", flush=True)
                found.setdefault(client.name, []).append(rate)
        finally:
            client.close()
    print("\n".join(summary(found)))


def release_tail(args: argparse.Namespace, url: str) -> None:
    """--tail: the bare release loop and the harness, alternated probe by probe at each rate."""
    ours = Ours(url, args.release)
    try:
        tail({f"bare release loop ({args.release})": Bare(args.release), f"harness ({args.release})": ours},
             args.tail, args.probes, args.seconds)
    finally:
        ours.close()


def main() -> None:
    args = parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two cores: one for the client, one for the load sink")
    os.sched_setaffinity(0, {CLIENT_CORE})
    sink, url = start_sink()
    print(f"load sink (scripts/loopback_server.py, answers at once) at {url} on core {SINK_CORE}; clients on core "
          f"{CLIENT_CORE}; constant arrivals, input {INPUT_LEN}, output {OUTPUT_LEN}; the harness releases requests "
          f"by {args.release} (woken by {mechanism(args.release)})", flush=True)
    try:
        (release_tail if args.tail else capacity)(args, url)
    finally:
        sink.terminate()
        sink.wait(timeout=10)


if __name__ == "__main__":
    main()

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

    python benchmarks/client_capacity.py [--start-rate 125] [--seconds 2] [--bisect 4] [--clients ours,aiperf]
                                         [--release timerfd|timer|spin]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agree_clients import aiperf_executable  # noqa: E402
from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions  # noqa: E402
from harness.config.sections import ModelConfig  # noqa: E402
from harness.model.spec import PRESETS_DIR, resolve_model  # noqa: E402
from harness.plan.points import SweepShape  # noqa: E402
from harness.run.process_group import free_port  # noqa: E402
from harness.scenarios.arrivals import arrival_times  # noqa: E402
from harness.scenarios.batch import BatchSpec  # noqa: E402
from harness.scenarios.release import DEFAULT_POLICY, POLICIES, mechanism  # noqa: E402
from harness.scenarios.stream import StreamSpec  # noqa: E402

INPUT_LEN, OUTPUT_LEN = 64, 8
SLIP_LIMIT_MS, RATE_TOLERANCE, MIN_REQUESTS = 1.0, 0.01, 500
CLIENT_CORE, SINK_CORE = 0, 1


def verdict(sends_s, rate: float) -> dict:
    """p99 send slip (ms) against the schedule anchored at the first send, and the achieved send rate."""
    sends = np.sort(np.asarray(sends_s, dtype=float))
    slips_ms = (sends - (sends[0] + np.arange(len(sends)) / rate)) * 1e3
    achieved = (len(sends) - 1) / (sends[-1] - sends[0])
    slip = float(np.percentile(slips_ms, 99))
    return {"slip_p99_ms": slip, "achieved": achieved,
            "kept": slip < SLIP_LIMIT_MS and abs(achieved / rate - 1) <= RATE_TOLERANCE}


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


def search(client, args) -> float:
    """Double until a rate is not kept (or halve until one is), then bisect; the highest kept rate, 0 if none."""
    kept, failed, rate, bisected = 0.0, None, args.start_rate, 0
    while bisected <= args.bisect and rate >= 1:
        n = max(MIN_REQUESTS, int(rate * args.seconds))
        result = client.probe(rate, n)
        print(f"  {rate:>8.0f}/s  {n:>6} requests  slip p99 {result['slip_p99_ms']:>8.3f} ms  achieved "
              f"{result['achieved']:>8.1f}/s  {'kept' if result['kept'] else 'not kept'} {result.get('note', '')}",
              flush=True)
        if result["kept"]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-rate", type=float, default=125.0)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each probe's stream")
    parser.add_argument("--bisect", type=int, default=4, help="bisection steps after the first failed rate")
    parser.add_argument("--clients", default="ours,aiperf")
    parser.add_argument("--release", choices=POLICIES, default=DEFAULT_POLICY,
                        help="how the harness waits for each request's time (stream.release)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two cores: one for the client, one for the load sink")
    os.sched_setaffinity(0, {CLIENT_CORE})
    sink, url = start_sink()
    print(f"load sink (scripts/loopback_server.py, answers at once) at {url} on core {SINK_CORE}; clients on core "
          f"{CLIENT_CORE}; constant arrivals, input {INPUT_LEN}, output {OUTPUT_LEN}; kept: p99 send slip < "
          f"{SLIP_LIMIT_MS:g} ms and achieved rate within {RATE_TOLERANCE:.0%} of offered; the harness releases "
          f"requests by {args.release} (woken by {mechanism(args.release)})", flush=True)
    found = {}
    clients = {"ours": lambda: Ours(url, args.release), "aiperf": lambda: Aiperf(url)}
    try:
        for name in args.clients.split(","):
            client = clients[name]()
            print(f"{client.name}:", flush=True)
            try:
                found[client.name] = search(client, args)
            finally:
                client.close()
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    for name, rate in found.items():
        print(f"{name}: highest rate kept on one core: {rate:.0f} requests/s")
    if len(found) == 2:
        (a, ra), (b, rb) = found.items()
        if rb:
            print(f"ratio {a} / {b}: {ra / rb:.2f}")


if __name__ == "__main__":
    main()

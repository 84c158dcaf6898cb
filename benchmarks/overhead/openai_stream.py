"""openai stream: `OpenAIBackend.serve` against a bare aiohttp SSE loop, one vLLM server, same bodies and schedule.

The server is a real vLLM OpenAI-compatible server of the tiny preset (dummy weights, fp32, eager, no prefix
caching: both sides send the same prompts, and a cache would flatter whichever went second), started once on
127.0.0.1 through the backend's own `command` path with benchmarks/serve_pairs.py's command and always stopped at
the end. One pair is one stream of N requests on a fixed Poisson schedule, run once by each side: the harness's
`serve(stream)` (backends/openai_compat/client.py: streamed POST /v1/completions, every SSE chunk stamped) and the
loop a user writes with aiohttp: one ClientSession, each request POSTed at its scheduled arrival with the same JSON
body the harness sends (token-id prompt, max_tokens = min_tokens, ignore_eos, greedy, stream_options with usage),
its SSE lines read until `data: [DONE]`. The figure is each side's mean end-to-end latency over the stream's
requests, scheduled arrival to last token (the harness's from its RequestTimings, as
harness/measure/metrics.py request_figures computes e2e_ms); prompts are a fresh draw per pair, the schedule the
same for every pair. Both sides must get exactly the output length for every request. --batch-sizes gives N, the
requests per stream; --rate the Poisson rate. At the defaults (16 requests at 16/s, ~45 ms each unloaded) requests
overlap and two cores keep up; at 40/s they queue.

Where the harness's time goes against the bare loop (issue 50): --metrics-path none drops the server-metrics scrape
that runs on its own thread during each stream, --release picks how the harness waits for each request's time
(stream.release), and --pin puts the server on one core and both clients on the other, as make client-capacity
does, so that what the harness's client spends is not taken from the server it measures.

    python benchmarks/overhead/openai_stream.py [--pairs 30] [--batch-sizes 16] [--rate 16] [--input-length 128]
                                                [--output-length 32] [--metrics-path none] [--release spin] [--pin]
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import statistics
import sys
import time
from functools import partial
from typing import Dict, List, Tuple

from inputs import measure_poisson_streams
from pairs import REPO, arguments, served, with_rate

sys.path.insert(0, str(REPO / "benchmarks"))
from serve_pairs import SERVER  # noqa: E402  the agreement benchmarks' vLLM server command, reused

from harness.scenarios.release import DEFAULT_POLICY, POLICIES  # noqa: E402


def stream_options(parser) -> None:
    """This script's own options beyond the rate: what the harness does during a stream, and where it runs."""
    with_rate(parser)
    parser.add_argument("--metrics-path", default="/metrics", help="the server-metrics scrape's path; none: no scrape")
    parser.add_argument("--release", choices=POLICIES, default=DEFAULT_POLICY, help="stream.release of the harness")
    parser.add_argument("--pin", action="store_true", help="the server on the second core, both clients on the first")


def user_body(model: str, prompt: List[int], output_length: int) -> Dict:
    """What a user posts to vLLM for exactly `output_length` greedy tokens, streamed, with token counts in every
    chunk (vLLM's continuous_usage_stats, which the harness asks for by default)."""
    return {"model": model, "prompt": prompt, "max_tokens": output_length, "min_tokens": output_length,
            "ignore_eos": True, "temperature": 0.0, "top_p": 1.0, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


async def bare_request(session, url: str, body: Dict, scheduled_s: float) -> Tuple[float, int]:
    """One streamed request: (ms from its scheduled arrival to its last token chunk, the server's token count)."""
    first_s = last_s = None
    tokens = 0
    async with session.post(url, json=body) as response:
        response.raise_for_status()
        async for line in response.content:
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            if payload == b"[DONE]":
                break
            chunk = json.loads(payload)
            if chunk.get("choices"):  # the closing usage-only chunk carries no token
                last_s = time.perf_counter()
                first_s = first_s or last_s
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    if first_s is None:
        raise RuntimeError("the stream carried no token")
    return (last_s - scheduled_s) * 1e3, tokens


async def bare_stream(url: str, bodies: List[Dict], arrivals_s: Tuple[float, ...]) -> List[Tuple[float, int]]:
    """Every request sent at its scheduled arrival, whatever is in flight, over one shared session."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        start_s = time.perf_counter()
        tasks = []
        for body, offset in zip(bodies, arrivals_s):
            scheduled_s = start_s + offset
            await asyncio.sleep(max(0.0, scheduled_s - time.perf_counter()))
            tasks.append(asyncio.create_task(bare_request(session, url, body, scheduled_s)))
        return list(await asyncio.gather(*tasks))


def sides(backend, output_length: int, release: str, stream_of, tokens: Dict[Tuple[str, int], List[int]]):
    """The two timed callables of one shape; each records its per-request output token counts in `tokens`."""
    from harness.measure.metrics import request_figures

    def harness(i: int) -> float:
        timing = served(backend.serve(dataclasses.replace(stream_of(i), release=release)))
        tokens["harness", i] = [r.output_tokens for r in timing.requests]
        return statistics.mean(request_figures(r).e2e_ms for r in timing.requests)

    def bare(i: int) -> float:
        stream = stream_of(i)
        bodies = [user_body(backend.served_model, p, output_length) for p in stream.requests.prompts]
        for j, body in enumerate(bodies):  # the same request the harness sends, field for field
            if json.loads(backend.client.request_body(stream, j)) != body:
                raise SystemExit(f"request {j}: the bare body differs from the harness's: {body}")
        got = asyncio.run(bare_stream(backend.client.url, bodies, stream.arrivals_s))
        tokens["bare", i] = [count for _, count in got]
        return statistics.mean(ms for ms, _ in got)

    return harness, bare


def same_counts(tokens: Dict[Tuple[str, int], List[int]], n: int, output_length: int) -> None:
    """Every request of both sides got exactly the output length (the server's counts: text would not survive
    re-tokenizing a random-weight model's output)."""
    for (side, i), counts in tokens.items():
        if counts != [output_length] * n:
            raise SystemExit(f"pair {i}: {side} got {counts} output tokens, asked for {output_length} each")


def main() -> None:
    args = arguments(__doc__.splitlines()[0], batch_sizes=(16,), extra=stream_options)
    from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    metrics_path = None if args.metrics_path == "none" else args.metrics_path
    options = OpenAIOptions(name="openai", command=SERVER, metrics_path=metrics_path)
    options.validate("backend")
    backend = OpenAIBackend(options, model, SweepShape(0, args.input_length, args.output_length, scenario="stream"))
    cores = sorted(os.sched_getaffinity(0))
    if args.pin and len(cores) < 2:
        raise SystemExit("--pin needs two cores: one for the server, one for the clients")
    try:
        start_s = time.perf_counter()
        if args.pin:  # the server's process group inherits the mask it starts with; then this process moves
            os.sched_setaffinity(0, {cores[1]})
        backend.load()
        if args.pin:
            os.sched_setaffinity(0, {cores[0]})
        print(f"server healthy after {time.perf_counter() - start_s:.1f} s at {backend.base_url}", file=sys.stderr,
              flush=True)
        variant = [f"metrics {args.metrics_path}", f"release {args.release}"] + (["server and client pinned apart"]
                                                                                 if args.pin else [])
        measure_poisson_streams("openai stream", "aiohttp SSE loop, same bodies and schedule", model, args,
                                partial(sides, backend, args.output_length, args.release), same_counts,
                                note=", ".join(variant))
    finally:
        backend.close()


if __name__ == "__main__":
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    main()

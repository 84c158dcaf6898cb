"""vllm stream: `VLLMBackend.serve` against a bare asyncio loop over the same AsyncLLM, same prompts and schedule.

The engine is the harness's, built for scenario: stream (backends/vllm_engine/stream.py, AsyncEngine: vLLM's
AsyncLLM of the tiny preset's config folder, dummy weights, fp32, eager, no prefix caching, on an event loop of its
own). One pair is one stream of N requests on a fixed Poisson schedule, run once by each side:

- harness: `backend.serve(stream)` (harness.scenarios.stream.drive releases each request at its scheduled time and
  iterates `AsyncLLM.generate`); the figure is the mean over requests of request_figures(r).e2e_ms
  (harness/measure/metrics.py), scheduled arrival to the engine's own last-token stamp.
- bare: the coroutine a user writes against AsyncLLM, run on the very loop the engine lives on (as the backend runs
  its streams: `loop.run_until_complete`): sleep until each request's arrival, `engine.generate(prompt, params,
  request_id)` with the SamplingParams the backend sends (backends/vllm_engine/engine.py, sampling_params, output
  kind DELTA), outputs iterated to the end and stamped with perf_counter; the figure is the mean of arrival to last
  output.

The harness's last token is the engine's stamp, the bare side's the moment the output reached this process: the
bare side also carries the hop back from the engine process (well under a millisecond on an idle machine), which
leans the ratio below 1, never above. Prompts are a fresh draw of the random workload per pair, the same for both
sides; the schedule is the same for every pair. Both sides must give every request exactly the output length and,
greedy, the same token ids. --batch-sizes gives N, the requests per stream; --rate the Poisson rate. At the defaults
(16 requests at 16/s) requests overlap and two cores keep up.

    python benchmarks/overhead/vllm_stream.py [--pairs 30] [--batch-sizes 16] [--rate 16] [--input-length 128]
                                              [--output-length 32]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from functools import partial
from typing import List, Tuple

from inputs import measure_poisson_streams
from pairs import Tokens, arguments, check_tokens, served, with_rate

KV_CACHE_BYTES = 1 << 30



async def bare_request(engine, prompt, params, request_id: str, scheduled_s: float) -> Tuple[float, Tuple[int, ...]]:
    """One request to AsyncLLM: (ms from its scheduled arrival to its last output, its token ids)."""
    first_s = last_s = None
    ids: List[int] = []
    async for out in engine.generate(prompt, params, request_id=request_id):
        new = out.outputs[0].token_ids
        if new:
            last_s = time.perf_counter()
            first_s = first_s or last_s
            ids.extend(new)
    if first_s is None:
        raise RuntimeError(f"request {request_id}: no token")
    return (last_s - scheduled_s) * 1e3, tuple(ids)


async def bare_stream(engine, prompts, params, arrivals_s, tag: str) -> List[Tuple[float, Tuple[int, ...]]]:
    """Every request sent at its scheduled arrival, whatever is in flight."""
    start_s = time.perf_counter()
    tasks = []
    for j, (prompt, p, offset) in enumerate(zip(prompts, params, arrivals_s)):
        scheduled_s = start_s + offset
        await asyncio.sleep(max(0.0, scheduled_s - time.perf_counter()))
        tasks.append(asyncio.create_task(bare_request(engine, prompt, p, f"{tag}-{j}", scheduled_s)))
    return list(await asyncio.gather(*tasks))


def sides(backend, stream_of, tokens: Tokens):
    """The two timed callables of one shape; each records its per-request token ids in `tokens`."""
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    from backends.vllm_engine.engine import sampling_params
    from harness.measure.metrics import request_figures

    def harness(i: int) -> float:
        timing = served(backend.serve(stream_of(i)))
        tokens["harness", i] = [r.token_ids for r in timing.requests]
        return statistics.mean(request_figures(r).e2e_ms for r in timing.requests)

    def bare(i: int) -> float:
        stream = stream_of(i)
        prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in stream.requests.prompts]
        params = sampling_params(stream.requests, output_kind=RequestOutputKind.DELTA)
        got = backend.engine.loop.run_until_complete(
            bare_stream(backend.engine.engine, prompts, params, stream.arrivals_s, f"bare{i}"))
        tokens["bare", i] = [ids for _, ids in got]
        return statistics.mean(ms for ms, _ in got)

    return harness, bare


def main() -> None:
    args = arguments(__doc__.splitlines()[0], batch_sizes=(16,), extra=with_rate)
    from backends.vllm_engine import VLLMBackend, VLLMOptions
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    options = VLLMOptions(name="vllm", device="cpu", enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES)
    # A stream with no max_concurrency: max_batch_size 0, the engine's own limit decides.
    shape = SweepShape(0, args.input_length, args.output_length, scenario="stream")
    backend = VLLMBackend(options, model, shape)
    try:
        backend.load()
        measure_poisson_streams("vllm stream", "asyncio loop over the same AsyncLLM.generate, same params and schedule",
                                model, args, partial(sides, backend), check_tokens, note="greedy")
    finally:
        backend.close()


if __name__ == "__main__":
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    main()

"""vllm speculative batch: `VLLMBackend.run` of an entry with `speculative` against a bare `llm.generate` on the same
speculating engine, same prompts and SamplingParams.

The engine is the harness's (`vllm.LLM` on the tiny preset's config folder, dummy weights, fp32, eager) built with
the entry's `speculative` section, method draft with `draft.layers_of_target: 1`: the target's first layer as a
random draft (backends/vllm_engine/speculative.py, speculative_config), so vLLM's own speculative decoding runs in
every `generate`. The harness side is `backend.run(batch).latency_ms`; the bare side hands the same token-id prompts
and the SamplingParams the backend builds (backends/vllm_engine/engine.py, sampling_params: greedy, forced length)
to `backend.llm.generate(..., use_tqdm=False)`, timed with perf_counter. Both must give every request the forced
length and the same greedy tokens, and the engine must have drafted.

For a speculative entry `run` also reads vLLM's spec-decode counters (spec_totals, the frontend's Prometheus
registry) before and after `generate`, outside its timed window: the note gives what one read costs and how much
longer a whole `run` call takes than its latency_ms.

    python benchmarks/overhead/vllm_speculative.py [--pairs 30] [--batch-sizes 1 8 16] [--input-length 128]
                                                   [--output-length 32] [--num-speculative-tokens 3]
"""

from __future__ import annotations

import os
import statistics
import time
from typing import List

from inputs import batch
from pairs import Tokens, alternate, arguments, batch_shape, check_tokens, emit, figure

KV_CACHE_BYTES = 1 << 30
DRAFT_LAYERS = 1  # of the tiny preset's 2: a draft that is cheaper than its target
COUNTER_READS = 200  # spec_totals() reads timed for the note



def own_options(parser) -> None:
    parser.add_argument("--num-speculative-tokens", type=int, default=3, help="k, tokens proposed per step")


def counter_read_us() -> float:
    """Median cost of one spec_totals() read, the call `run` makes before and after `generate`."""
    from backends.vllm_engine.speculative import spec_totals

    costs = []
    for _ in range(COUNTER_READS):
        start = time.perf_counter()
        spec_totals()
        costs.append((time.perf_counter() - start) * 1e6)
    return statistics.median(costs)


def sides(backend, spec_of, tokens: Tokens, outside_ms: List[float]):
    """The two timed callables of one shape. The harness side also records how much of its `run` call lies
    outside latency_ms (`outside_ms`) and that the engine drafted."""
    from vllm.inputs import TokensPrompt

    from backends.vllm_engine.engine import sampling_params

    def harness(i: int) -> float:
        batch = spec_of(i)
        start = time.perf_counter()
        timing = backend.run(batch)
        outside_ms.append((time.perf_counter() - start) * 1e3 - timing.latency_ms)
        if timing.spec is None or timing.spec.draft_steps <= 0:
            raise SystemExit(f"pair {i}: the engine drafted nothing ({timing.spec})")
        tokens["harness", i] = timing.token_ids
        return timing.latency_ms

    def bare(i: int) -> float:
        batch = spec_of(i)
        prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in batch.prompts]
        params = sampling_params(batch)
        start = time.perf_counter()
        outputs = backend.llm.generate(prompts, params, use_tqdm=False)
        ms = (time.perf_counter() - start) * 1e3
        tokens["bare", i] = tuple(tuple(o.outputs[0].token_ids) for o in outputs)
        return ms

    return harness, bare


def measure(backend, model, args, k: int) -> None:
    """One figure per batch size; both sides of a pair run the same batch."""
    from harness.scenarios.batch import BatchSpec

    inp, out = args.input_length, args.output_length
    for bs in args.batch_sizes:
        def spec_of(i: int, bs=bs) -> BatchSpec:
            return batch(model, bs, inp, out, i)

        tokens: Tokens = {}
        outside_ms: List[float] = []
        ours, theirs = alternate(*sides(backend, spec_of, tokens, outside_ms), args.pairs)
        check_tokens(tokens, bs, out)
        note = (f"greedy; draft: the target's first {DRAFT_LAYERS} layer(s), k={k}; run() outside latency_ms: "
                f"median {statistics.median(outside_ms):.2f} ms per call, one spec_totals() read "
                f"{counter_read_us():.0f} us")
        emit(figure("vllm speculative batch", "llm.generate on the same speculating LLM, same prompts and "
                    "SamplingParams", batch_shape(bs, inp, out), ours, theirs, note=note))


def main() -> None:
    args = arguments(__doc__.splitlines()[0], extra=own_options)
    from backends.vllm_engine import VLLMBackend, VLLMOptions
    from harness.config.sections import ModelConfig
    from harness.config.speculative import parse
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    k = args.num_speculative_tokens
    speculative = parse({"method": "draft", "num_speculative_tokens": k,
                         "draft": {"layers_of_target": DRAFT_LAYERS}}, "speculative")
    options = VLLMOptions(name="vllm", device="cpu", enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES,
                          speculative=speculative)
    reason = VLLMBackend.unsupported(options, "batch", model)
    if reason:
        raise SystemExit(reason)
    backend = VLLMBackend(options, model, SweepShape(max(args.batch_sizes), args.input_length, args.output_length))
    try:
        backend.load()
        measure(backend, model, args, k)
    finally:
        backend.close()


if __name__ == "__main__":
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    main()

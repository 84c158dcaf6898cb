"""vllm batch: `VLLMBackend.run` against a bare `llm.generate` with the same SamplingParams, on one engine.

The engine is the harness's (`vllm.LLM` on the tiny preset's config folder, dummy weights, eager, as the backend
builds it); the bare side hands it the same token-id prompts and the SamplingParams the backend builds
(backends/vllm_engine/engine.py, sampling_params) and times the call with `perf_counter`, as vLLM's own latency
benchmark times its batch. `--temperature 1.0` samples, unseeded (`sampling.seed: null`) unless `--seeded`.

`--bare bench` holds the harness to vLLM's latency benchmark's own call instead (vllm/benchmarks/latency.py: one
SamplingParams for the whole batch, n=1, top_p 1.0, ignore_eos, max_tokens, detokenize off, at the harness's
temperature): what the harness's choice of SamplingParams costs over what vLLM's benchmark asks for.

    python benchmarks/overhead/vllm_batch.py [--pairs 30] [--batch-sizes 1 8 16] [--temperature 0] [--seeded]
                                             [--bare same|bench]
"""

from __future__ import annotations

import os
import time

from inputs import batch
from pairs import alternate, arguments, batch_shape, emit, figure

KV_CACHE_BYTES = 1 << 30


def own_options(parser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seeded", action="store_true", help="per-request seeds, as sampling.seed: 0 gives")
    parser.add_argument("--bare", choices=("same", "bench"), default="same",
                        help="same: llm.generate with the backend's SamplingParams; bench: vLLM benchmark's call")


def main() -> None:
    args = arguments(__doc__.splitlines()[0], extra=own_options)
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from backends.vllm_engine import VLLMBackend, VLLMOptions
    from backends.vllm_engine.engine import sampling_params
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepPoint, SweepShape
    from harness.scenarios.batch import BatchSpec, Sampling
    from workloads.base import batch_seeds

    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    options = VLLMOptions(name="vllm", device="cpu", enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES)
    backend = VLLMBackend(options, model, SweepShape(max(args.batch_sizes), args.input_length, args.output_length))
    backend.load()
    inp, out = args.input_length, args.output_length
    sampling = Sampling(args.temperature)
    for bs in args.batch_sizes:
        def spec(i: int, bs=bs) -> BatchSpec:
            seeds = batch_seeds(0, SweepPoint(inp, out, bs), "timed", i) if args.seeded else ()
            return batch(model, bs, inp, out, i, sampling, seeds)

        def bare(i: int) -> float:
            requests = spec(i)
            prompts = [TokensPrompt(prompt_token_ids=p) for p in requests.prompts]
            params = (sampling_params(requests) if args.bare == "same" else
                      SamplingParams(n=1, temperature=args.temperature, top_p=1.0, ignore_eos=True, max_tokens=out,
                                     detokenize=False))
            start = time.perf_counter()
            backend.llm.generate(prompts, params, use_tqdm=False)
            return (time.perf_counter() - start) * 1e3

        ours, theirs = alternate(lambda i: backend.run(spec(i)).latency_ms, bare, args.pairs)
        sampled = "greedy" if not args.temperature else \
            f"temperature {args.temperature:g}" + (", seeded" if args.seeded else ", unseeded")
        bare_name = ("llm.generate, same prompts and SamplingParams" if args.bare == "same" else
                     "vLLM latency benchmark's llm.generate call, same prompts")
        emit(figure("vllm batch", bare_name, batch_shape(bs, inp, out), ours, theirs, note=sampled))
    backend.close()


if __name__ == "__main__":
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    main()

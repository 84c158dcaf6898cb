"""hf batch: `HFBackend.run` (streamer-stamped `generate`) against a bare `model.generate` on the same loaded model.

    python benchmarks/overhead/hf_batch.py [--pairs 30] [--batch-sizes 1 8 16] [--input-length 128] [--output-length 32]
                                           [--device cpu|cuda] [--preset tiny-llama] [--dtype fp32] [--compile]

`--compile` times the static cache and torch.compile path (the entry `cache_implementation: static, compile: true`)
against a bare `generate` of the very same generation config, compiled forward and static cache included, with no
streamer: what the harness's step stamps cost on the path gpt-fast-style runs take (scripts/gpu-first-contact.sh
step compiled runs it on the Llama-3.1-8B shape).

`make overhead` is this path alone (benchmarks/overhead_all.py --only hf-batch); the GPU suite runs it with
`--device cuda` (tests/gpu/test_gpu_overhead.py).
"""

from __future__ import annotations

import time

from inputs import batch
from pairs import alternate, arguments, batch_shape, emit, figure

import torch

from backends.generate.base import device_sync
from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec


def synchronized_ms(device: str, call) -> float:
    """One call, timed between device synchronizations, as the harness's stamps are."""
    sync = device_sync(device)
    with torch.inference_mode():
        sync()
        start = time.perf_counter()
        call()
        sync()
        return (time.perf_counter() - start) * 1e3


def bare_generate_ms(net, eos_id: int, spec: BatchSpec, device: str) -> float:
    """One bare `generate`, forced to the same length greedily as the harness asks."""
    input_ids = torch.tensor(spec.prompts, device=device)
    n = spec.max_output_tokens
    return synchronized_ms(device, lambda: net.generate(
        input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=n, min_new_tokens=n, do_sample=False,
        pad_token_id=eos_id))


def bare_configured_ms(backend: HFBackend, spec: BatchSpec, device: str) -> float:
    """One bare `generate` with the entry's own generation config (its static cache and compiled forward), the same
    ids and mask, and no streamer: all that differs from the harness's run is the step stamping."""
    input_ids, attention_mask = backend._inputs(spec)
    config = backend._generation_config(spec)
    return synchronized_ms(device, lambda: backend.net.generate(input_ids, attention_mask=attention_mask,
                                                                generation_config=config))


def measure(backend, name: str, bare_name: str, args, device: str = "cpu", configured: bool = False) -> None:
    """One figure per batch size; both sides of a pair run the same batch. `configured`: the bare side runs the
    entry's generation config (bare_configured_ms) rather than generate's defaults."""
    for bs in args.batch_sizes:
        def spec(i: int, bs=bs) -> BatchSpec:
            return batch(backend.model, bs, args.input_length, args.output_length, i)

        def bare(i: int) -> float:
            if configured:
                return bare_configured_ms(backend, spec(i), device)
            return bare_generate_ms(backend.net, backend.eos_ids[0], spec(i), device)

        ours, theirs = alternate(lambda i: backend.run(spec(i)).latency_ms, bare, args.pairs)
        emit(figure(name, bare_name, batch_shape(bs, args.input_length, args.output_length), ours, theirs))


def with_device(parser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the model runs (default cpu)")
    parser.add_argument("--preset", default="tiny-llama", help="the model's preset, random weights (default tiny-llama)")
    parser.add_argument("--dtype", default="fp32", help="the model's dtype (default fp32)")
    parser.add_argument("--compile", action="store_true",
                        help="static cache and torch.compile, against generate with the same config (default: eager)")


def main() -> None:
    args = arguments(__doc__.splitlines()[0], extra=with_device)
    model = resolve_model(ModelConfig(preset=args.preset, dtype=args.dtype))
    shape = SweepShape(max(args.batch_sizes), args.input_length, args.output_length)
    compiled = dict(cache_implementation="static", compile=True) if args.compile else {}
    backend = HFBackend(HFOptions(name="hf", device=args.device, **compiled), model, shape)
    backend.load()
    name = "hf batch" if args.device == "cpu" else f"hf batch ({args.device})"
    if args.compile:
        measure(backend, f"{name}, static cache + compile", "model.generate, the same generation config, no streamer",
                args, args.device, configured=True)
    else:
        measure(backend, name, "model.generate, same ids, greedy, min_new_tokens", args, args.device)


if __name__ == "__main__":
    main()

"""hf speculative batch: `HFBackend.run` with a draft model (transformers' assisted generation) against a bare
`model.generate(..., assistant_model=draft)` on the same loaded target and the very draft object the backend built.

The target is the tiny preset with 4 layers (random weights, fp32, sdpa); the draft is `layers_of_target: 1`, the
target's own first layer and head (harness/model/drafts.py), proposing --num-speculative-tokens tokens per step.
The backend (backends/generate/assisted.py) puts k on the draft's own generation_config (num_assistant_tokens, a constant
schedule, no confidence cut-off), which is where transformers reads it, so the bare side, handed the same draft,
speculates exactly alike. Both sides: the same ids (hf_batch's draw of the random workload, a fresh one per pair),
greedy, exactly --output-length tokens (min_new_tokens); the bare call runs without the harness's pass-counting
hook on the target (AssistedGeneration's TargetPasses), which a user's model would not have, and its tokens must
equal the harness's. Assisted generation runs one sequence at a time: batch size 1 only.

    python benchmarks/overhead/hf_speculative.py [--pairs 30] [--input-length 128] [--output-length 32]
                                                 [--num-speculative-tokens 4]
"""

from __future__ import annotations

import contextlib
import time
from typing import Tuple

from pairs import Tokens, alternate, arguments, batch_shape, check_tokens, emit, figure

import torch

from backends.generate.assisted import TargetPasses
from backends.generate.base import device_sync
from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.config.speculative import parse
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec

from inputs import batch

PATH = "hf speculative batch"
BARE = "model.generate(assistant_model=the backend's draft), same ids, greedy, min_new_tokens"
TARGET_LAYERS = 4  # as tests/test_speculative.py: a 1-layer draft of a deeper target



def own_options(parser) -> None:
    parser.add_argument("--num-speculative-tokens", type=int, default=4, help="k, the draft's tokens per step")


@contextlib.contextmanager
def without_pass_counter(net):
    """The target without the harness's TargetPasses hook for the duration: the bare side is a user's model."""
    hooks = net._forward_pre_hooks
    ours = {key: hook for key, hook in hooks.items() if isinstance(getattr(hook, "__self__", None), TargetPasses)}
    for key in ours:
        del hooks[key]
    try:
        yield
    finally:
        hooks.update(ours)


def bare_assisted(net, draft, eos_id: int, spec: BatchSpec, device: str) -> Tuple[float, Tuple[int, ...]]:
    """One bare assisted `generate`, forced to the harness's length greedily: (ms, the generated ids)."""
    sync = device_sync(device)
    input_ids = torch.tensor(spec.prompts, device=device)
    n = spec.max_output_tokens
    with torch.inference_mode(), without_pass_counter(net):
        sync()
        start = time.perf_counter()
        out = net.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, pad_token_id=eos_id, assistant_model=draft)
        sync()
        elapsed_ms = (time.perf_counter() - start) * 1e3
    return elapsed_ms, tuple(out[0, input_ids.shape[1]:].tolist())


def sides(backend, spec_of, tokens: Tokens, device: str):
    """The two timed callables of one shape; each records its generated ids in `tokens`."""
    def harness(i: int) -> float:
        timing = backend.run(spec_of(i))
        tokens["harness", i] = timing.token_ids
        return timing.latency_ms

    def bare(i: int) -> float:
        elapsed_ms, ids = bare_assisted(backend.net, backend.assisted.draft, backend.eos_ids[0], spec_of(i), device)
        tokens["bare", i] = [ids]
        return elapsed_ms

    return harness, bare


def main() -> None:
    args = arguments(__doc__.splitlines()[0], batch_sizes=(1,), extra=own_options)
    if set(args.batch_sizes) != {1}:
        raise SystemExit("transformers' assisted generation runs batch size 1 only: --batch-sizes 1")
    k = args.num_speculative_tokens
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32",
                                      overrides={"num_hidden_layers": TARGET_LAYERS}))
    speculative = parse({"method": "draft", "num_speculative_tokens": k, "draft": {"layers_of_target": 1}}, "s")
    device = "cpu"
    backend = HFBackend(HFOptions(name="hf", device=device, speculative=speculative), model,
                        SweepShape(1, args.input_length, args.output_length))
    backend.load()
    try:
        def spec_of(i: int) -> BatchSpec:
            return batch(model, 1, args.input_length, args.output_length, i)

        tokens: Tokens = {}
        ours, theirs = alternate(*sides(backend, spec_of, tokens, device), args.pairs)
        check_tokens(tokens, 1, args.output_length)
        note = f"draft: layers_of_target 1 of a {TARGET_LAYERS}-layer target, k={k}"
        emit(figure(PATH, BARE, batch_shape(1, args.input_length, args.output_length), ours, theirs, note=note))
    finally:
        backend.close()


if __name__ == "__main__":
    main()

"""How the `hf` backend cuts a request stream (`scenario: stream`) into batches: `batching: static` queues arriving
requests and runs one `generate` per batch, each request's gaps taken from the step stamps of the family's streamer
(base.py, StepClock; harness/scenarios/static_batching.py); `batching: continuous` hands them to transformers'
continuous-batching manager (continuous.py). And what each batching asks of the entry's options, holds in memory and
tells the manifest.
"""

from __future__ import annotations

from typing import Dict, Optional

from backends.generate.continuous import CB_PAGE_SIZE, cb_sizes
from harness.errors import UserError
from harness.fields import is_int
from harness.model.memory import MemoryEstimate, estimate_point, kv_cache_bytes
from harness.model.spec import ModelSpec
from harness.plan.points import SweepShape

BATCHING = ("static", "continuous")
# What transformers' continuous-batching manager runs (eager becomes its paged|eager); flex_attention it refuses.
CONTINUOUS_ATTENTIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3")


def validate_batching(options, key: str) -> None:
    """The stream keys of an `hf` entry (batching, max_batch_size, max_wait_ms), and what `batching: continuous`
    takes of the others; raise UserError naming `key`.<field>."""
    if options.batching not in BATCHING:
        raise UserError(f"{key}.batching: {options.batching!r} is not one of {', '.join(BATCHING)}")
    if not is_int(options.max_batch_size) or options.max_batch_size < 1:
        raise UserError(f"{key}.max_batch_size: must be an integer of at least 1, got {options.max_batch_size!r}")
    wait = options.max_wait_ms
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait < float("inf"):
        raise UserError(f"{key}.max_wait_ms: must be a number of milliseconds, 0 or more, got {wait!r}")
    if options.batching == "continuous":
        if options.attn_implementation not in CONTINUOUS_ATTENTIONS:
            raise UserError(f"{key}.attn_implementation: {options.attn_implementation!r} does not run with "
                            f"batching: continuous; use one of {', '.join(CONTINUOUS_ATTENTIONS)}")
        if options.cache_implementation != "dynamic" or options.compile:
            raise UserError(f"{key}.batching: continuous runs transformers' paged KV cache, uncompiled: it takes "
                            f"neither {key}.cache_implementation: static nor {key}.compile: true")


def continuous_attention_unsupported(options, scenario: str, only: str) -> Optional[str]:
    """Why a model whose transformers class `only` computes its own attention cannot run this entry's stream, or
    None: continuous batching needs the model to read the paged cache."""
    if scenario == "stream" and options.batching == "continuous":
        # Checked: the manager runs it without complaint, but MPT's own attention never reads the paged cache, so
        # its tokens differ from generate's.
        return (f"transformers' continuous batching runs models on its attention interface (paged KV cache); "
                f"{only} computes its own attention: use batching: static")
    return None


def continuous_estimate(options, model: ModelSpec, estimate: MemoryEstimate, input_length: int,
                        output_length: int) -> MemoryEstimate:
    """A point's memory under `batching: continuous`, from its `generate` estimate (whose weights it keeps)."""
    # The manager's paged cache is sized for max_batch_size requests whatever the cap (`ContinuousBatcher.sizes`),
    # and without flash attention it builds an attention mask over a whole step's tokens and the whole cache.
    n = options.max_batch_size
    sizes = cb_sizes(n, input_length, input_length + output_length)
    cache_tokens = sizes["num_blocks"] * CB_PAGE_SIZE
    step = sizes["max_batch_tokens"]
    flash = options.attn_implementation.startswith("flash")
    mask = 0 if flash else step * (cache_tokens + step) * model.dtype_bytes
    eager = options.attn_implementation == "eager"
    return MemoryEstimate(estimate.weights_bytes, kv_cache_bytes(model, 1, cache_tokens),
                          estimate_point(model, n, input_length, output_length, eager).activation_bytes + mask)


def batching_info(options, shape: SweepShape) -> Dict[str, object]:
    """How a stream is batched, for the manifest: static's limits, or the continuous-batching manager's sizes."""
    if options.batching == "static":
        return dict(batching="static", max_batch_size=options.max_batch_size, max_wait_ms=options.max_wait_ms)
    sizes = cb_sizes(options.max_batch_size, shape.max_input_length, shape.max_tokens)
    return dict(batching="continuous", max_requests_per_batch=sizes["max_requests_per_batch"],
                max_batch_tokens=sizes["max_batch_tokens"], kv_cache_blocks=sizes["num_blocks"],
                kv_cache_page_size=CB_PAGE_SIZE, kv_cache_capacity_tokens=sizes["num_blocks"] * CB_PAGE_SIZE)

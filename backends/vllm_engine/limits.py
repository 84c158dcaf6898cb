"""What a vLLM entry's options bound, known before any engine loads, so that --dry-run and --plan say it: a batch
past max_num_seqs, a sequence past max_model_len, a tensor-parallel size that does not split the model's heads. The
KV cache's own bound is known once the engine has built it (engine.py, `cannot_run`)."""

from __future__ import annotations

from typing import Optional

from backends.vllm_engine.options import VLLMOptions
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint


def options_bound(options: VLLMOptions, point: SweepPoint) -> Optional[str]:
    """Why the options themselves cannot run `point` (it is skipped), or None."""
    batch = point.batch_size
    if options.max_num_seqs is not None and batch is not None and batch > options.max_num_seqs:
        return f"vLLM runs at most {options.max_num_seqs} sequences at once (max_num_seqs)"
    longest = point.input_length + point.output_length
    if options.max_model_len is not None and longest > options.max_model_len:
        return (f"{point.input_length} + {point.output_length} = {longest} tokens is longer than max_model_len "
                f"({options.max_model_len})")
    return None


def heads_unsplit(model: ModelSpec, tp_size: int) -> Optional[str]:
    """vLLM splits attention heads over its tensor-parallel ranks: the query heads must divide by tp_size, and the KV
    heads too, or tp_size by them (vLLM then keeps a KV head on several ranks)."""
    c = getattr(model.config, "text_config", None) or model.config
    heads, kv_heads = getattr(c, "num_attention_heads", None), getattr(c, "num_key_value_heads", None)
    if tp_size <= 1 or not heads:
        return None
    if heads % tp_size:
        return f"tp_size {tp_size} does not divide the model's {heads} attention heads (vLLM splits them over its ranks)"
    if kv_heads and kv_heads % tp_size and tp_size % kv_heads:
        return (f"tp_size {tp_size} and the model's {kv_heads} KV heads divide neither way (vLLM splits them over its "
                "ranks, or keeps each on several)")
    return None

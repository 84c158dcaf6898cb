"""`model.quantization` for the engines timed through `generate` that quantize (hf, and accelerate on the layers its map
places): torchao's weight quantization, applied to the model's linear layers (the LM head included) after its weights
are made or loaded, so a sweep without the hub still measures the quantized kernels (docs/measurement.md,
"Quantization"). And what every engine of the family reads of its model with a bare forward: the weights' bytes as
loaded, a logits probe, perplexity.

- int8: `Int8WeightOnlyConfig` (int8 weights, one scale per output channel; activations stay in the model's dtype).
- int4: on CUDA `Int4WeightOnlyConfig` (tinygemm's tile-packed int4, groups of 128, bf16 models; torchao's default
  layout needs the separate mslk kernels); on CPU, where its packing needs CUDA,
  `IntxWeightOnlyConfig(int4, groups of 32)`, which keeps each int4 value in a byte: `weight_bytes` says so. A layer
  whose input width the group does not divide takes the next smaller group (64, 32 on CUDA; 16, 8 on CPU).
- fp8: `Float8WeightOnlyConfig`, on GPUs with FP8 (compute capability 8.9+).
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

from harness.scenarios.batch import LogitsProbe

FP8_MIN_CAPABILITY = (8, 9)
# The `model.quantization` values mapped here: an engine that quantizes lists them as its `quantizations`.
QUANTIZATIONS = ("none", "int8", "int4", "fp8")


def unsupported(method: str, device: str, dtype: Optional[str]) -> Optional[str]:
    """What planning can tell without a GPU at hand (a GPU's FP8 capability is checked at load)."""
    if method == "fp8" and device == "cpu":
        return "quantization fp8: torchao's fp8 weights need a GPU with FP8 (compute capability 8.9+), not a CPU"
    if method == "int4" and device == "cuda" and dtype not in (None, "bf16"):
        return f"quantization int4: torchao's GPU int4 (tinygemm's tile-packed layout) needs bf16 weights, not {dtype}"
    return None


def check_device(method: str, device: str) -> None:
    """RuntimeError where `method` cannot run on `device` (an error row naming why, never a full-precision run)."""
    if method != "fp8":
        return
    import torch

    if device != "cuda" or torch.cuda.get_device_capability() < FP8_MIN_CAPABILITY:
        raise RuntimeError("quantization fp8: needs a GPU with FP8 (compute capability 8.9+), this entry runs on "
                           f"{device if device != 'cuda' else torch.cuda.get_device_name()}")


def quantize(net, method: str, device: str) -> str:
    """Quantize the nn.Linear layers of `net` in place; say what was done (the manifest's runtime info). int4 groups
    a row's weights: each layer takes the largest group size that divides its input width, and a layer no group size
    divides keeps its weights (named in what is said)."""
    if method == "none":
        return "none"
    check_device(method, device)
    import torch
    from torchao.quantization import (
        Float8WeightOnlyConfig,
        Int4WeightOnlyConfig,
        Int8WeightOnlyConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )
    from torchao.quantization.granularity import PerGroup

    if method == "int8":
        quantize_(net, Int8WeightOnlyConfig())
        return "int8 weight-only (torchao Int8WeightOnlyConfig), every linear layer"
    if method == "fp8":
        quantize_(net, Float8WeightOnlyConfig())
        return "fp8 weights (torchao Float8WeightOnlyConfig), every linear layer"
    groups = (128, 64, 32) if device == "cuda" else (32, 16, 8)
    used = []
    for group in groups:
        # torch's stubs lack its sub-byte dtypes (torch.int1 to torch.int7), which it has at run time.
        config = (Int4WeightOnlyConfig(group_size=group, int4_packing_format="tile_packed_to_4d") if device == "cuda"
                  else IntxWeightOnlyConfig(weight_dtype=torch.int4,  # type: ignore[attr-defined]
                                            granularity=PerGroup(group)))
        before = _linear_names(net)
        quantize_(net, config, filter_fn=lambda m, _, g=group: _plain_linear(m) and m.in_features % g == 0)
        if len(_linear_names(net)) < len(before):
            used.append(f"groups of {group} for {len(before) - len(_linear_names(net))} layers")
    kept = _linear_names(net)
    name = "Int4WeightOnlyConfig" if device == "cuda" else "IntxWeightOnlyConfig(int4)"
    return (f"int4 weight-only (torchao {name}): {', '.join(used) or 'no layer'}"
            + (f"; kept unquantized (no group size divides their input width): {', '.join(kept)}" if kept else ""))


def _plain_linear(module) -> bool:
    import torch

    return isinstance(module, torch.nn.Linear) and not hasattr(module.weight, "__tensor_flatten__")


def _linear_names(net):
    return [name for name, module in net.named_modules() if _plain_linear(module)]


def probe_logits(net, input_ids, attention_mask, lengths) -> LogitsProbe:
    """One untimed forward over left-padded prompts: the last position's logits and every prompt position's argmax."""
    import torch

    with torch.inference_mode():
        logits = net(input_ids=input_ids, attention_mask=attention_mask).logits.float()
    top1 = logits.argmax(dim=-1).tolist()
    return LogitsProbe(logits[:, -1, :].cpu().numpy(), tuple(tuple(row[len(row) - n:]) for row, n in zip(top1, lengths)))


def perplexity(net, token_ids, window: int, device: str) -> float:
    """Every window's tokens scored given those before them in it: exp(total NLL / tokens predicted), in float64."""
    import torch

    total, predicted = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(token_ids) - 1, window):
            ids = torch.tensor([list(token_ids[start:start + window])], dtype=torch.long, device=device)
            if ids.shape[1] < 2:
                break
            logits = net(input_ids=ids).logits[0, :-1].double()
            total += torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum").item()
            predicted += ids.shape[1] - 1
    return math.exp(total / predicted)


def weight_bytes(net) -> int:
    """Bytes the model's parameters and buffers hold as loaded: a quantized weight counts its data, scales and zero
    points (torchao's tensor subclasses, flattened), not the dtype it computes in."""
    seen = set()
    total = 0
    for tensor in _tensors(net):
        for leaf in _leaves(tensor):
            key = (leaf.data_ptr(), leaf.nbytes) if leaf.device.type != "meta" else id(leaf)
            if key not in seen:  # tied weights (embeddings and LM head) are stored once
                seen.add(key)
                total += leaf.nbytes
    return total


def _tensors(net) -> Iterable:
    yield from (p for _, p in net.named_parameters(remove_duplicate=False))
    yield from (b for _, b in net.named_buffers(remove_duplicate=False))


def _leaves(tensor) -> Iterable:
    """A plain tensor, or the plain tensors a tensor subclass is made of (`__tensor_flatten__`), recursively."""
    if not hasattr(tensor, "__tensor_flatten__"):
        yield tensor
        return
    names, _ = tensor.__tensor_flatten__()
    for name in names:
        inner = getattr(tensor, name)
        if inner is not None:
            yield from _leaves(inner)

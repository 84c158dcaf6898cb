"""Deterministic random weights: every value is a function of (seed, parameter name, position).

Backends build the same model in different ways: whole on one device (hf), one module at a
time on its mapped device (accelerate), or only a tensor-parallel shard per rank (deepspeed).
Cross-checking their greedy tokens needs identical weights however they are built, and a TP
rank must not build the whole model to keep its shard. So a parameter is defined tile by
tile: tile (i, j) of the parameter's 2-D view (rows = all dims but the last) is drawn from its
own generator, seeded by a hash of (seed, name, i, j). Any slice is built by drawing only the
tiles it overlaps, on the CPU (the same numbers on every machine), cast and copied tile by tile
into the destination, wherever it lives: no full copy of a shard, let alone of the model, is
ever made on the host.

Values follow HF's own `_init_weights` for Llama-style models: matrices (Linear, Embedding,
fused experts) normal(0, initializer_range), 1-D weights (norms) ones, biases zeros. Buffers
(rotary `inv_freq`) are computed by the model's own constructor, not drawn.
"""

from __future__ import annotations

import hashlib
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

if TYPE_CHECKING:  # imported where used: planning reads this module without torch
    import torch

WEIGHTS_SEED = 0  # fixed: timings do not depend on weight values; cross-checks need the same ones everywhere
TILE_ROWS, TILE_COLS = 256, 512  # a TP shard edge falls on a multiple of 128/512 in real models: little waste
DEFAULT_INIT_RANGE = 0.02


def init_range_of(hf_config) -> float:
    """The std HF's `_init_weights` uses: `initializer_range`, 0.02 when missing."""
    return float(getattr(hf_config, "initializer_range", None) or DEFAULT_INIT_RANGE)


def init_rule(name: str, shape: Sequence[int]) -> str:
    """normal for matrices, zeros for biases (and scalars), ones for other 1-D weights (norms)."""
    if len(shape) >= 2:
        return "normal"
    if name.endswith("bias") or len(shape) == 0:
        return "zeros"
    return "ones"


def tile_seed(seed: int, name: str, row_tile: int, col_tile: int) -> int:
    digest = hashlib.blake2b(f"{seed}/{name}/{row_tile}/{col_tile}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # torch seeds are < 2**63


def _matrix_shape(shape: Sequence[int]) -> Tuple[int, int]:
    return (math.prod(shape[:-1]), shape[-1]) if len(shape) else (1, 1)


def _region(shape: Sequence[int], dim: int, start: int, stop: int) -> Optional[Tuple[int, int, int, int]]:
    """Rows and columns of the 2-D view covered by `start:stop` along `dim`, or None if not a rectangle."""
    rows, cols = _matrix_shape(shape)
    if dim == len(shape) - 1:
        return 0, rows, start, stop
    if dim == 0:
        inner = math.prod(shape[1:-1])
        return start * inner, stop * inner, 0, cols
    return None


def fill_(dst, name: str, full_shape: Sequence[int], dim: int = 0, start: int = 0, *, seed: int = WEIGHTS_SEED,
          init_range: float = DEFAULT_INIT_RANGE):
    """Write the slice `start:start + dst.shape[dim]` along `dim` of parameter `name` into `dst` (any device)."""
    import torch

    full_shape = tuple(full_shape)
    rule = init_rule(name, full_shape)
    with torch.no_grad():
        if rule != "normal":
            return dst.fill_(1.0 if rule == "ones" else 0.0)
        stop = start + (dst.shape[dim] if dst.dim() else 1)
        region = _region(full_shape, dim, start, stop)
        if region is None:  # a middle dimension: rare enough to build the whole parameter once
            whole = torch.empty(full_shape, dtype=dst.dtype, device=dst.device)
            fill_(whole, name, full_shape, seed=seed, init_range=init_range)
            return dst.copy_(whole.narrow(dim, start, stop - start))
        _fill_region(dst.view(region[1] - region[0], region[3] - region[2]), name, full_shape, region, seed,
                     init_range)
    return dst


def _fill_region(out, name: str, full_shape, region, seed: int, init_range: float) -> None:
    """Draw every tile that overlaps rows r0:r1, cols c0:c1 of the 2-D view and copy its overlap into `out`.

    Into a device's memory, a band of tile rows at a time, the bands drawn in parallel: torch releases the GIL inside
    randn, so a 16-core host draws an 8B model's 8e9 values in seconds rather than the 40 s one core takes (an 8B
    sweep loads the model once per entry), and each band is one copy to the device. Into host memory, tile by tile
    on this thread: worker threads' malloc arenas keep what their staging freed (175 MiB more RSS for tiny-llama,
    measured), which a host's memory figures would count. Each tile has its own seed, so the numbers do not depend on
    which thread drew them, nor on the path.
    """
    import torch

    r0, r1 = region[0], region[1]
    bands = range(r0 // TILE_ROWS, (r1 - 1) // TILE_ROWS + 1)
    if out.device.type == "cpu" or len(bands) < 4:
        for i in bands:
            _draw_band(out, name, full_shape, region, seed, init_range, i, staged=False)
        return
    inference = torch.is_inference_mode_enabled()  # thread-local, like grad mode: a worker takes the caller's

    def draw_band(i: int) -> None:
        with torch.inference_mode(inference), torch.no_grad():
            _draw_band(out, name, full_shape, region, seed, init_range, i, staged=True)

    list(_draw_pool().map(draw_band, bands))  # list(): a worker's exception is raised here, not lost


def _draw_band(out, name: str, full_shape, region, seed: int, init_range: float, i: int, staged: bool) -> None:
    """Tile row `i`'s overlap with the region, scaled by init_range: staged in a host band copied to `out` at once,
    or each tile copied into `out` as drawn."""
    import torch

    rows, cols = _matrix_shape(full_shape)
    r0, r1, c0, c1 = region
    tile_r0 = i * TILE_ROWS
    a, b = max(r0, tile_r0), min(r1, tile_r0 + TILE_ROWS)
    band = torch.empty(b - a, c1 - c0) if staged else None
    generator = torch.Generator()
    for j in range(c0 // TILE_COLS, (c1 - 1) // TILE_COLS + 1):
        tile_c0 = j * TILE_COLS
        generator.manual_seed(tile_seed(seed, name, i, j))
        # The tile's shape depends only on the full shape, so every slice sees the same numbers.
        tile = torch.randn(min(TILE_ROWS, rows - tile_r0), min(TILE_COLS, cols - tile_c0), generator=generator)
        c, d = max(c0, tile_c0), min(c1, tile_c0 + TILE_COLS)
        part = tile[a - tile_r0:b - tile_r0, c - tile_c0:d - tile_c0]
        if band is not None:
            band[:, c - c0:d - c0].copy_(part)
        else:
            out[a - r0:b - r0, c - c0:d - c0].copy_(part.mul_(init_range))
    if band is not None:
        out[a - r0:b - r0].copy_(band.mul_(init_range))


_POOL: Optional[ThreadPoolExecutor] = None


def _draw_pool() -> ThreadPoolExecutor:
    """One pool per process, as wide as the host's cores (capped: the copies to the device serialize anyway)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1)), thread_name_prefix="weights")
    return _POOL


def full_tensor(name: str, shape: Sequence[int], dtype, *, seed: int = WEIGHTS_SEED,
                init_range: float = DEFAULT_INIT_RANGE, device="cpu"):
    """The whole parameter `name`, as every backend sees it."""
    import torch

    return fill_(torch.empty(tuple(shape), dtype=dtype, device=device), name, shape, seed=seed,
                 init_range=init_range)


def shard_tensor(name: str, full_shape: Sequence[int], dim: int, start: int, stop: int, dtype, *,
                 seed: int = WEIGHTS_SEED, init_range: float = DEFAULT_INIT_RANGE, device="cpu"):
    """Slice `start:stop` along `dim` of parameter `name`, drawing only the tiles it needs."""
    import torch

    shape = list(full_shape)
    shape[dim] = stop - start
    return fill_(torch.empty(shape, dtype=dtype, device=device), name, full_shape, dim, start, seed=seed,
                 init_range=init_range)


def build_empty(hf_config, dtype, **kwargs):
    """The model with every parameter on the meta device and its buffers (rotary inv_freq) computed on the CPU.

    accelerate's `init_empty_weights` keeps buffers real, so the model's own constructor computes
    them exactly as in an ordinary build; parameters cost nothing until materialized.
    """
    from accelerate import init_empty_weights

    from harness.model.spec import model_class

    with init_empty_weights():
        model = model_class(hf_config).from_config(hf_config, dtype=dtype, **kwargs)
    model.tie_weights()  # the context's re-registration of parameters unties them (tie_word_embeddings models)
    return model


def materialize(module, device, *, prefix: str = "", seed: int = WEIGHTS_SEED, init_range: float = DEFAULT_INIT_RANGE,
                done: Optional[Dict[int, Tuple[torch.nn.Parameter, torch.nn.Parameter]]] = None) -> None:
    """Give every meta parameter under `module` its deterministic values on `device`; move its buffers there.

    `prefix` is the module's name in the whole model (parameter names seed the values). `done`
    maps parameters already materialized (by id) to their replacement, so tied weights stay tied
    when a model is materialized in several calls.
    """
    import torch

    done = {} if done is None else done
    for mod_name, sub in module.named_modules(prefix=prefix):
        for key, param in list(sub._parameters.items()):
            if param is None or not param.is_meta:
                continue
            if id(param) not in done:
                name = f"{mod_name}.{key}" if mod_name else key
                value = full_tensor(name, param.shape, param.dtype, seed=seed, init_range=init_range, device=device)
                # Keeping `param` alive keeps its id unique while `done` is in use.
                done[id(param)] = (param, torch.nn.Parameter(value, requires_grad=False))
            sub._parameters[key] = done[id(param)][1]
        for key, buf in list(sub._buffers.items()):
            if buf is not None and not buf.is_meta:
                sub._buffers[key] = buf.to(device)

"""DeepSpeed-Inference tensor parallelism (`deepspeed.init_inference`), timed exactly like `hf`.

The launcher starts this entry as `tp_size` ranks (torchrun); each rank builds the model, DeepSpeed
shards it (AutoTP: LinearLayer / LinearAllreduce with their all-reduces), and every rank runs the
same batches with the same inputs, because the collectives need them all. Only rank 0 reports.
`run` is the family's (base.py): the engine's `generate` is the HF model's, timed by the same streamer.

Random weights never exist whole on a rank: the model is built on the meta device, AutoTP slices
the meta tensors (shapes only), DeepSpeed allocates the slices empty on the rank's device, and each
rank fills just its slices from `harness.model.weights`, the same values `hf` builds in full.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Tuple

from backends.base import NODES_HELP, Placement, resolve_device
from backends.generate.base import GenerateEngine, GenerateOptions, GenerateOptionsT, device_sync
from backends.generate.deepspeed_ranks import (
    all_reduce_across_nodes,
    gather_from_ranks,
    process_rss_bytes,
    shm_allreduce_active,
    unlink_shm_allreduce_buffer,
)
from harness.config.cluster import check_entry_nodes
from harness.config.sections import DTYPES
from harness.errors import UserError
from harness.fields import opt
from harness.measure.peak_memory import PeakMemory, process_peak_rss_bytes
from harness.model import weights
from harness.model.hardware import cuda_device_count, usable_cpus
from harness.model.memory import MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint, SweepShape

if TYPE_CHECKING:  # imported where used: planning reads this module without torch
    import torch

# A CPU "device" is a core; two ranks is the smallest real tensor-parallel run (and all a 2-core box holds).
CPU_DEFAULT_RANKS = 2
# DeepSpeed's JIT op builder (0.19.8, op_builder/builder.py compute_capability_args) reads each entry of
# TORCH_CUDA_ARCH_LIST as major.minor integers, so `9.0a` (Hopper's arch-specific target, which PyTorch accepts and
# NVIDIA's images set) ends its kernel build in "invalid literal for int() with base 10: '0a'" (an H200,
# docs/results/h200-20261128). Its inference kernels use nothing arch-specific: the entry's ranks get the plain `9.0`.
ARCH_SUFFIX = r"(\d+\.\d+)[a-z]+\b"  # a pattern for re.search and re.sub
# DeepSpeed captures a CUDA graph of the injected model only for the encoders whose policies say so (its containers'
# cuda_graph_supported); its graph of a whole module replays the shapes it captured, which `generate` changes from
# the prefill to each step's one token.
CUDA_GRAPH_REFUSAL = ("init_inference.enable_cuda_graph: DeepSpeed captures a CUDA graph with kernel injection for "
                      "BERT, DistilBERT and CLIP only (its policies' cuda_graph_supported), and without it one graph "
                      "of the whole model, which cannot replay `generate`'s changing shapes (the prefill, then one "
                      "token a step); for a captured decode step use hf with compile: true")
# init_inference keys that duplicate a typed option (DeepSpeed's aliases included): one place per setting.
OPTION_KEYS = {
    "tensor_parallel": "tp_size", "tp": "tp_size", "mp_size": "tp_size", "dtype": "dtype",
    "replace_with_kernel_inject": "replace_with_kernel_inject", "kernel_inject": "replace_with_kernel_inject",
    "max_tokens": "max_tokens", "max_out_tokens": "max_tokens",
}


@dataclass
class DeepSpeedOptions(GenerateOptions):
    tp_size: Optional[int] = opt(
        None, help=f"Tensor-parallel ranks on all nodes together; default: every visible GPU of each node, or "
        f"{CPU_DEFAULT_RANKS} ranks on the CPU (gloo plus DeepSpeed's shared-memory all-reduce within a node)."
    )
    nodes: int = opt(1, help=NODES_HELP)
    dtype: Optional[str] = opt(None, help="bf16 | fp16 | fp32, overriding model.dtype for this entry.")
    replace_with_kernel_inject: bool = opt(
        False, help="DeepSpeed's fused inference kernels (CUDA only) instead of AutoTP's sharded HF layers."
    )
    max_tokens: Optional[int] = opt(
        None, help="DeepSpeed's max_tokens (longest input + output); default: the sweep's largest input + output."
    )
    init_inference: Dict[str, Any] = opt(factory=dict, help="Passed through to deepspeed.init_inference.")

    def validate(self, key: str) -> None:
        super().validate(key)
        check_entry_nodes(self.nodes, key, self.tp_size, "tp_size")
        for name in ("tp_size", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{key}.{name}: must be at least 1, got {value}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise UserError(f"{key}.dtype: {self.dtype!r} is not one of {', '.join(DTYPES)}")
        for arg in self.init_inference:
            if arg in OPTION_KEYS:
                raise UserError(f"{key}.init_inference.{arg}: duplicates {key}.{OPTION_KEYS[arg]}; set it there")


class EntryDtype(Protocol):
    """Options whose `dtype` overrides model.dtype: both DeepSpeed backends' (here and deepspeed_zero.py)."""

    dtype: Optional[str]


def entry_model(options: EntryDtype, model: ModelSpec) -> ModelSpec:
    """The model as this entry runs it: `dtype` overrides the sweep's."""
    return dataclasses.replace(model, dtype=options.dtype) if options.dtype else model


class DeepSpeedEngine(GenerateEngine[GenerateOptionsT]):
    """What both DeepSpeed backends are (this one and deepspeed_zero.py): ranks under torchrun, each building the
    model from the harness's weights, timed through the HF model's `generate`, in the entry's dtype (`entry_model`,
    which each one's `__init__` hands on)."""

    engine_modules = ("torch", "transformers", "deepspeed")
    distributions = ("torch", "transformers", "deepspeed")
    distributed = True


class DeepSpeedBackend(DeepSpeedEngine[DeepSpeedOptions]):
    Options = DeepSpeedOptions

    def __init__(self, options: DeepSpeedOptions, model: ModelSpec, shape: SweepShape):
        super().__init__(options, entry_model(options, model), shape)
        if self.placement.device == "cuda":
            self.peak_memory = RankDevicePeak()

    @classmethod
    def resolve_placement(cls, options: DeepSpeedOptions) -> Placement:
        device = resolve_device(options.device)
        per_node = cuda_device_count() if device == "cuda" else max(1, CPU_DEFAULT_RANKS // options.nodes)
        ranks = options.tp_size or per_node * options.nodes
        return Placement(device, num_devices=ranks, tp_size=ranks, nodes=options.nodes)

    @classmethod
    def launch_env(cls, options: DeepSpeedOptions, placement: Placement) -> Dict[str, str]:
        # DeepSpeed's shared-memory all-reduce sizes itself from LOCAL_SIZE, which only the `deepspeed`
        # launcher sets; under torchrun it segfaults without it.
        env = {"LOCAL_SIZE": str(placement.ranks_per_node)}
        if placement.device == "cuda":
            env["DS_ACCELERATOR"] = "cuda"
            arch_list = os.environ.get("TORCH_CUDA_ARCH_LIST")
            if arch_list and re.search(ARCH_SUFFIX, arch_list):
                env["TORCH_CUDA_ARCH_LIST"] = re.sub(ARCH_SUFFIX, r"\1", arch_list)
            return env
        env["DS_ACCELERATOR"] = "cpu"
        if "OMP_NUM_THREADS" not in os.environ:  # torchrun would pin every rank to 1 thread; share the cores instead
            env["OMP_NUM_THREADS"] = str(max(1, usable_cpus() // placement.ranks_per_node))
        return env

    @classmethod
    def unsupported(cls, options: DeepSpeedOptions, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        """What the options cannot run, known before any rank starts (--dry-run says it)."""
        if options.replace_with_kernel_inject and resolve_device(options.device) != "cuda":
            return "replace_with_kernel_inject needs DeepSpeed's CUDA kernels; this entry runs on the CPU"
        if options.init_inference.get("enable_cuda_graph"):
            return CUDA_GRAPH_REFUSAL
        return super().unsupported(options, scenario, model)

    @classmethod
    def point_unsupported(cls, options: DeepSpeedOptions, point: SweepPoint) -> Optional[str]:
        longest = point.input_length + point.output_length
        if options.max_tokens is not None and longest > options.max_tokens:
            return f"input + output = {longest} tokens exceeds DeepSpeed's max_tokens ({options.max_tokens})"
        return super().point_unsupported(options, point)

    @classmethod
    def estimate_memory(cls, options: DeepSpeedOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """All ranks together: the sharded model once, plus what AutoTP replicates on every rank.

        Embeddings are not sharded, and each rank computes full-width hidden states and logits.
        """
        model = entry_model(options, model)
        ranks = cls.resolve_placement(options).tp_size
        # Eager attention's score matrices (MPT's only kind) are per head: each rank holds its heads' share, which
        # activations x ranks counts generously.
        e = estimate_point(model, batch_size, input_length, output_length,
                           eager_attention=options.attn_implementation == "eager")
        c = model.config
        embeddings = c.vocab_size * c.hidden_size * model.dtype_bytes
        return MemoryEstimate(e.weights_bytes + (ranks - 1) * embeddings, e.kv_cache_bytes,
                              e.activation_bytes * ranks)

    def load(self) -> None:
        import deepspeed

        if self.options.replace_with_kernel_inject and self.placement.device != "cuda":
            raise RuntimeError("replace_with_kernel_inject needs DeepSpeed's CUDA kernels; this entry runs on the CPU")
        rss_before_load = process_rss_bytes()
        if self.placement.nodes > 1 and self.placement.device == "cpu":
            all_reduce_across_nodes()
        model, sharded_random = self._build_model()
        buffers = {name: buf.clone() for name, buf in model.named_buffers()}
        full_shapes = {name: tuple(p.shape) for name, p in model.named_parameters(remove_duplicate=False)}
        names = canonical_names(model)  # AutoTP unties a tied lm_head; its values must stay the embedding's
        # AutoTP slices the meta tensors (shapes only); the engine then allocates the slices, empty.
        self.engine = deepspeed.init_inference(model, **self._init_kwargs())
        if sharded_random:
            fill_random_shards(self.engine.module, full_shapes, names, weights.init_range_of(self.model.hf_config))
            restore_buffers(self.engine.module, buffers)
        # GenerateEngine.run calls self.net.generate: DeepSpeed's, which runs the HF model's.
        self._ready(self.engine, device_sync(self.placement.device))
        # Peak RSS up to here (the runner resets it per point, so the load's peak is only seen now).
        self.load_rss_bytes = gather_from_ranks((rss_before_load, process_peak_rss_bytes(os.getpid())))
        # Past that collective every rank has mapped every other rank's buffer, so the names can go.
        unlink_shm_allreduce_buffer()

    def _build_model(self) -> Tuple[torch.nn.Module, bool]:
        """The HF model to hand to DeepSpeed, and whether its random weights are still to be filled per shard."""
        from transformers import AutoModelForCausalLM

        kwargs = dict(dtype=self.model.torch_dtype, attn_implementation=self.options.attn_implementation)
        if self.model.weights == "pretrained":
            # DeepSpeed's AutoTP path: every rank loads the checkpoint on the host, then keeps its shard.
            return AutoModelForCausalLM.from_pretrained(self.model.source, **kwargs), False
        model = weights.build_empty(self.model.hf_config, **kwargs)
        if self.options.replace_with_kernel_inject:
            # Kernel injection copies real tensors into its own modules: the whole model per rank, on the host.
            weights.materialize(model, "cpu", init_range=weights.init_range_of(self.model.hf_config))
            return model, False
        return model, True

    def _init_kwargs(self) -> Dict[str, Any]:
        o = self.options
        kwargs = dict(tensor_parallel={"tp_size": self.placement.tp_size}, dtype=self.model.torch_dtype,
                      replace_with_kernel_inject=o.replace_with_kernel_inject,
                      max_tokens=o.max_tokens or self.shape.max_tokens)
        return {**kwargs, **o.init_inference}

    def cannot_run(self, batch_size: int, input_length: int, output_length: int) -> Optional[str]:
        limit = self.options.max_tokens or self.shape.max_tokens
        if input_length + output_length > limit:
            return f"input + output = {input_length + output_length} tokens exceeds DeepSpeed's max_tokens ({limit})"
        return None

    def runtime_info(self) -> Dict[str, object]:
        import torch.distributed as dist

        info = {**super().runtime_info(), "tp_size": self.placement.tp_size, "dtype": self.model.dtype,
                "replace_with_kernel_inject": self.options.replace_with_kernel_inject,
                "max_tokens": self.options.max_tokens or self.shape.max_tokens,
                "comm_backend": dist.get_backend() if dist.is_initialized() else None,
                "tp_layers": tp_layer_counts(self.engine.module), "shm_allreduce": shm_allreduce_active(),
                "rss_before_load_bytes_per_rank": [before for before, _ in self.load_rss_bytes],
                "load_peak_rss_bytes_per_rank": [peak for _, peak in self.load_rss_bytes],
                "peak_memory_bytes_is": "rank 0's (each rank holds one shard)"}
        if self.placement.device == "cpu":
            info["cpu_threads_per_rank"] = os.environ.get("OMP_NUM_THREADS")
        return info

    def close(self) -> None:
        del self.engine
        super().close()


class RankDevicePeak(PeakMemory):
    """This rank's GPU allocator peak. The base class visits every visible GPU, which from each of 8 ranks
    would touch all 8 devices; a rank only allocates on its own."""

    def __init__(self):
        super().__init__("cuda")

    def reset(self) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats(torch.cuda.current_device())

    def read(self) -> int:
        import torch

        return torch.cuda.max_memory_allocated(torch.cuda.current_device())

    def current(self) -> int:
        import torch

        return torch.cuda.memory_allocated(torch.cuda.current_device())


def canonical_names(model) -> Dict[str, str]:
    """Every parameter name -> the name its values are drawn under: the first one, as hf's build sees it."""
    first: Dict[int, str] = {}
    return {name: first.setdefault(id(p), name) for name, p in model.named_parameters(remove_duplicate=False)}


def fill_random_shards(module, full_shapes: Dict[str, tuple], names: Dict[str, str], init_range: float) -> None:
    """Fill every parameter (an AutoTP slice or a replicated tensor) with its values from `harness.model.weights`."""
    for mod_name, sub in module.named_modules():
        for key, param in sub.named_parameters(recurse=False):
            name = f"{mod_name}.{key}" if mod_name else key
            full_shape, dim, pieces = _slice_of(sub, key, param)
            if full_shape != full_shapes.get(name, full_shape):
                raise RuntimeError(f"random weights: {name} was resized by DeepSpeed in a way this backend cannot "
                                   "fill; use model.weights: pretrained")
            for at, start, width in pieces:
                whole = param.dim() == 0 or (at, width) == (0, param.shape[dim])
                dst = param.data if whole else param.data.narrow(dim, at, width)
                weights.fill_(dst, names.get(name, name), full_shape, dim, start, init_range=init_range)


def _slice_of(module, key: str, param) -> Tuple[tuple, int, List[Tuple[int, int, int]]]:
    """(full shape, sharded dim, pieces) of one parameter after AutoTP: each piece (where in the shard, where in the
    full parameter, width) along that dim; one piece of the whole parameter when replicated."""
    from deepspeed.module_inject.layers import (
        LinearAllreduce,
        LinearLayer,
        LmHeadLinearAllreduce,
        SubParamColumnParallel,
        TensorParallel_Layer,
    )

    kind = type(module)
    whole = tuple(param.shape), 0, [(0, 0, param.shape[0] if param.dim() else 1)]  # replicated
    if isinstance(module, SubParamColumnParallel) and getattr(module, "_subparam_sizes", None) is not None:
        # A fused weight (MPT's Wqkv: q, k and v stacked) is cut per sub-parameter: this rank's shard is its piece
        # of each, concatenated.
        pieces, at, offset = [], 0, 0
        for size, widths in zip(module._subparam_sizes, module._subparam_shard_widths):
            width = widths[module.tp_index]
            if width:
                pieces.append((at, offset + sum(widths[:module.tp_index]), width))
            at, offset = at + width, offset + size
        return (module._orig_weight_shape if key == "weight" else module._orig_bias_shape), 0, pieces
    if kind not in (LinearLayer, LinearAllreduce, LmHeadLinearAllreduce):
        if isinstance(module, TensorParallel_Layer):  # interleaved fused QKV, packed gate/up: strided layouts
            raise RuntimeError(f"random weights: AutoTP layer {kind.__name__} is not supported; "
                               "use model.weights: pretrained")
        return whole
    start = sum(module._partition_sizes[:module.tp_index])
    width = param.shape[0] if kind is LinearLayer or key == "bias" else param.shape[1]
    if kind is LinearLayer:  # column parallel: output features (weight rows and bias) are split
        return (module._orig_weight_shape if key == "weight" else module._orig_bias_shape), 0, [(0, start, width)]
    if key == "bias":  # row parallel: the bias is added once, after the all-reduce, on every rank
        return whole
    return module._orig_weight_shape, 1, [(0, start, width)]


def restore_buffers(module, buffers: Dict[str, torch.Tensor]) -> None:
    """DeepSpeed allocates a meta model with `to_empty`, which also blanks real buffers (rotary inv_freq)."""
    for name, value in buffers.items():
        owner, _, key = name.rpartition(".")
        sub = module.get_submodule(owner)
        sub._buffers[key] = value.to(sub._buffers[key].device)


def tp_layer_counts(module) -> Dict[str, int]:
    """How many layers of each AutoTP kind the model ended with: proof the shards are DeepSpeed's."""
    counts: Dict[str, int] = {}
    for sub in module.modules():
        if type(sub).__module__.startswith("deepspeed."):
            counts[type(sub).__name__] = counts.get(type(sub).__name__, 0) + 1
    return counts

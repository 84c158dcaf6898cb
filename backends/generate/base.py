"""What every engine timed through HF `generate` shares (hf, accelerate, deepspeed, deepspeed_zero).

Each engine builds its transformers model its own way in `load` (on one device, spread by a device map, sharded by
AutoTP, partitioned by ZeRO) and hands it to `_ready`. From there a batch is one `generate` call, stamped at every
decoding step by a streamer (`StepClock`), with the same inputs, generation config, logits probe and perplexity.
What only `hf` runs (request streams, a static or compiled KV cache, speculation) is hf.py's: this class reads no
option of it. It runs batches only, unspeculated and unquantized, unless an engine says otherwise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, TypeVar

from backends.base import DEVICES, Backend, BackendOptions, Placement, resolve_device
from backends.generate import profiling, quantization
from harness.errors import UserError
from harness.fields import opt
from harness.model import config_json as config_view
from harness.model.memory import MemoryEstimate, estimate_point
from harness.model.spec import ModelSpec, architecture
from harness.scenarios.batch import BatchSpec, BatchTiming, LogitsProbe, SpecCounts, probed

ATTENTIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")


@dataclass
class GenerateOptions(BackendOptions):
    """Options of every engine timed through HF `generate` (hf, accelerate, deepspeed, deepspeed_zero)."""

    device: str = opt("auto", help="auto (cuda when present, else cpu) | cpu | cuda.")
    attn_implementation: str = opt("sdpa", help=" | ".join(ATTENTIONS) + ".")

    def cannot_profile(self) -> Optional[str]:
        return None  # torch.profiler around one more `generate` (GenerateEngine.profile)

    def validate(self, key: str) -> None:
        for name, allowed in (("device", DEVICES), ("attn_implementation", ATTENTIONS)):
            value = getattr(self, name)
            if value not in allowed:
                raise UserError(f"{key}.{name}: {value!r} is not one of {', '.join(allowed)}")


# The entry's options: each engine of the family names its own
# (`class AccelerateBackend(GenerateEngine[AccelerateOptions])`).
GenerateOptionsT = TypeVar("GenerateOptionsT", bound=GenerateOptions)


class StepClock:
    """A streamer that stamps the host clock as each decoding step hands its tokens over.

    It has transformers' BaseStreamer interface (put, end), duck-typed as `generate` uses it: subclassing would
    import transformers, and with it torch, into every process that merely plans a sweep.

    `generate` calls `put` once with the prompt, then once per step with one new token
    for every sequence of the batch, so the first stamp is the batch's TTFT instant and
    the last one its final token, whatever the batch size. Assisted generation (one sequence)
    hands over every token a verifying pass emits at once, as a (1, n) tensor: each of them
    gets that pass's stamp, so `stamps[k]` is always the arrival of token k + 1.
    """

    def __init__(self, sync: Callable[[], None]):
        self.sync = sync
        self.stamps: List[float] = []
        self._seen_prompt = False

    def put(self, value) -> None:
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        self.sync()
        now = time.perf_counter()
        self.stamps.extend([now] * (value.shape[-1] if value.dim() == 2 else 1))

    def end(self) -> None:
        pass


def tokens_produced(generated: List[List[int]], eos_ids: List[int], budgets: Sequence[int]) -> Tuple[int, ...]:
    """Real tokens per sequence: up to and including the first EOS (the rest is padding), at most its budget."""
    eos = set(eos_ids)
    counts = []
    for row, budget in zip(generated, budgets):
        stop = next((i + 1 for i, token in enumerate(row) if token in eos), len(row))
        counts.append(min(stop, budget))
    return tuple(counts)


class GenerateEngine(Backend[GenerateOptionsT]):
    """A batch is one `generate` on the model `load` built and handed to `_ready`; `run` returns its stamps."""

    Options: ClassVar[type] = GenerateOptions
    engine_modules: ClassVar[Tuple[str, ...]] = ("torch", "transformers")
    distributions: ClassVar[Tuple[str, ...]] = ("torch", "transformers")
    harness_random_weights = True  # every engine of the family builds random weights from harness/model/weights.py
    # Declared here, not inherited by accident: static batches, no speculation, no quantization. An engine that runs
    # more says so (hf: streams, speculation and torchao's quantizations; accelerate: the quantizations).
    scenarios: ClassVar[Tuple[str, ...]] = ("batch",)
    speculative_methods: ClassVar[Tuple[str, ...]] = ()
    quantizations: ClassVar[Tuple[str, ...]] = ("none",)

    @classmethod
    def unsupported(cls, options: GenerateOptionsT, scenario: str, model: Optional[ModelSpec]) -> Optional[str]:
        if options.attn_implementation.startswith("flash_attention") and resolve_device(options.device) != "cuda":
            return f"attn_implementation: {options.attn_implementation} is a CUDA kernel; this entry runs on the CPU"
        return (super().unsupported(options, scenario, model) or cls._attention_unsupported(options, scenario, model)
                or quantization.unsupported(options.quantization, resolve_device(options.device),
                                            model.dtype if model is not None else None))

    @classmethod
    def _attention_unsupported(cls, options: GenerateOptionsT, scenario: str,
                               model: Optional[ModelSpec]) -> Optional[str]:
        """A model whose transformers class computes attention itself (MPT: ALiBi added to the score matrix) runs
        eager attention only: transformers refuses any other attn_implementation, and the entry would not measure
        the one it names."""
        only = config_view.eager_attention_only(model.config) if model is not None else None
        if only is None:
            return None
        if options.attn_implementation != "eager":
            return (f"transformers' {only} has eager attention only (no {options.attn_implementation} kernel): "
                    "set attn_implementation: eager")
        return cls._own_attention_unsupported(options, scenario, only)

    @classmethod
    def _own_attention_unsupported(cls, options: GenerateOptionsT, scenario: str, only: str) -> Optional[str]:
        """Why a model whose transformers class `only` computes its own attention cannot run what else this entry
        asks for (hf: a continuously batched stream), or None."""
        return None

    @classmethod
    def resolve_placement(cls, options: GenerateOptionsT) -> Placement:
        return Placement(device=resolve_device(options.device))

    @classmethod
    def estimate_memory(cls, options: GenerateOptionsT, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        eager = options.attn_implementation == "eager"
        return estimate_point(model, batch_size, input_length, output_length, eager_attention=eager)

    def _ready(self, net, sync: Callable[[], None]) -> None:
        """What `run` needs once `load` built the model: the module whose `generate` is timed, the EOS ids to mask,
        and how to wait for the device."""
        self.net = net
        self.eos_ids = _eos_ids(self.model.hf_config)
        pad = getattr(self.model.hf_config, "pad_token_id", None)
        self.pad_id = pad if isinstance(pad, int) else self.eos_ids[0]
        self._configs: Dict[tuple, object] = {}
        self._sync = sync

    def run(self, batch: BatchSpec) -> BatchTiming:
        return self._generate(batch)[0]

    def _generate(self, batch: BatchSpec) -> Tuple[BatchTiming, List[float]]:
        """`run`, also handing back the step stamps (step k's stamp: every unfinished sequence's token k+1)."""
        import torch

        input_ids, attention_mask = self._inputs(batch)
        config = self._generation_config(batch)
        clock = StepClock(self._sync)
        extra = self._generate_kwargs()
        with torch.inference_mode():
            if batch.seeds:
                torch.manual_seed(batch.seeds[0])  # generate samples from one global generator: a seed per batch
            self._sync()
            start = time.perf_counter()
            out = self.net.generate(input_ids, attention_mask=attention_mask, generation_config=config,
                                    streamer=clock, **extra)
            self._sync()
            end = time.perf_counter()
        generated = out[:, input_ids.shape[1]:].tolist()
        produced = tokens_produced(generated, self.eos_ids, batch.max_tokens)
        # Every sequence gets its first token in the same step; each one's last is the step of its own last token
        # (a static batch keeps stepping until its longest sequence is done).
        last = tuple(clock.stamps[n - 1] for n in produced)
        return BatchTiming(start, clock.stamps[0], max(last), end, produced,
                           request_first_token_s=(clock.stamps[0],) * batch.batch_size, request_last_token_s=last,
                           token_ids=tuple(tuple(row[:n]) for row, n in zip(generated, produced)),
                           spec=self._spec_counts(input_ids.shape[1], produced[0])), clock.stamps

    def _generate_kwargs(self) -> Dict[str, object]:
        """What `generate` gets besides the inputs, the config and the streamer (hf: a draft model); called before
        each batch."""
        return {}

    def _spec_counts(self, prompt_tokens: int, emitted: int) -> Optional[SpecCounts]:
        """The batch's speculation counters (hf with `speculative`), or None."""
        return None

    def _inputs(self, batch: BatchSpec):
        """Ids left-padded to the longest prompt, with the mask that hides the padding: generate appends
        after the last column, so every prompt must end there."""
        import torch

        width = max(batch.input_tokens)
        ids = [[self.pad_id] * (width - len(p)) + list(p) for p in batch.prompts]
        mask = [[0] * (width - len(p)) + [1] * len(p) for p in batch.prompts]
        device = self.placement.device
        return torch.tensor(ids, dtype=torch.long, device=device), torch.tensor(mask, dtype=torch.long, device=device)

    def _generation_config(self, batch: BatchSpec):
        """Up to the batch's largest budget; forced: EOS is masked out until then (min == max). Greedy unless the
        sweep samples (top_k 0 turns HF's default top-k of 50 off)."""
        key = (batch.max_output_tokens, batch.forced, batch.sampling)
        if key not in self._configs:
            from transformers import GenerationConfig

            n, s = batch.max_output_tokens, batch.sampling
            sampling = {} if s.greedy else dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
            fields = {"disable_compile": True, **self._generation_fields()}
            self._configs[key] = GenerationConfig(
                max_new_tokens=n, min_new_tokens=n if batch.forced else None, do_sample=not s.greedy, num_beams=1,
                use_cache=True, eos_token_id=self.eos_ids, pad_token_id=self.pad_id, **sampling, **fields)
        return self._configs[key]

    def _generation_fields(self) -> Dict[str, object]:
        """GenerationConfig fields of the engine's own (hf: its cache, compile, prompt lookup). None here: transformers'
        default KV cache, which grows each step, and an uncompiled forward."""
        return {}

    def engine_stats(self) -> Dict[str, object]:
        return {"weight_bytes": quantization.weight_bytes(self.net)}

    def probe_logits(self, batch: BatchSpec) -> Optional[LogitsProbe]:
        head = probed(batch)
        input_ids, attention_mask = self._inputs(head)
        return quantization.probe_logits(self.net, input_ids, attention_mask, head.input_tokens)

    def profile(self, batch: BatchSpec) -> Optional[bytes]:
        """The engine's own `run` (a ZeRO rank's share, a pipeline's stages) under torch.profiler, its timing
        dropped."""
        name = f"generate bs{batch.batch_size} in{max(batch.input_tokens)} out{batch.max_output_tokens}"
        return profiling.traced(lambda: self.run(batch), self.placement.device, name)

    def perplexity(self, token_ids: Sequence[int], window: int) -> Optional[float]:
        return quantization.perplexity(self.net, token_ids, window, self.placement.device)

    def runtime_info(self) -> Dict[str, object]:
        """What every engine of the family reports; each adds what it decided."""
        import torch

        return {"device": self.placement.device, "torch_threads": torch.get_num_threads(),
                "architecture": self.built_architecture()}

    def built_architecture(self) -> Dict[str, object]:
        """The shapes of the model as built (a DeepSpeed engine wraps it in `.module`), for the manifest."""
        return architecture(getattr(self.net, "module", self.net).config)

    def close(self) -> None:
        import torch

        del self.net
        if self.placement.device == "cuda":
            torch.cuda.empty_cache()


def device_sync(device: str) -> Callable[[], None]:
    """Wait for queued GPU work before a clock stamp; nothing to wait for on the CPU."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def _eos_ids(hf_config) -> List[int]:
    eos = getattr(hf_config, "eos_token_id", None)
    if eos is None:
        raise RuntimeError("model config has no eos_token_id; cannot force the output length")
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]

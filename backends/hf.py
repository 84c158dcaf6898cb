"""HF transformers `generate`, timed per step through a streamer."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from transformers.generation.streamers import BaseStreamer

from backends.base import DEVICES, Backend, BackendOptions, Placement, resolve_device
from harness import weights
from harness.config import opt
from harness.errors import UserError
from harness.memory import MemoryEstimate, estimate_point
from harness.models import ModelSpec, architecture
from harness.timing import BatchSpec, BatchTiming

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

    def validate(self, key: str) -> None:
        super().validate(key)
        if self.cache_implementation not in CACHES:
            raise UserError(f"{key}.cache_implementation: {self.cache_implementation!r} is not one of "
                            f"{', '.join(CACHES)}")
        if self.compile and self.cache_implementation != "static":
            raise UserError(f"{key}.compile: true needs {key}.cache_implementation: static")

    def static_cache(self) -> bool:
        return self.cache_implementation == "static"

    def compiled(self) -> bool:
        return self.compile


class StepClock(BaseStreamer):
    """A streamer that stamps the host clock as each decoding step hands its tokens over.

    `generate` calls `put` once with the prompt, then once per step with one new token
    for every sequence of the batch, so the first stamp is the batch's TTFT instant and
    the last one its final token, whatever the batch size.
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
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass


class HFBackend(Backend):
    Options = HFOptions
    harness_random_weights = True

    @classmethod
    def resolve_placement(cls, options: HFOptions) -> Placement:
        return Placement(device=resolve_device(options.device))

    @classmethod
    def estimate_memory(cls, options: HFOptions, model: ModelSpec, batch_size: int, input_length: int,
                        output_length: int) -> MemoryEstimate:
        eager = options.attn_implementation == "eager"
        return estimate_point(model, batch_size, input_length, output_length, eager_attention=eager)

    def load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        device, dtype = self.placement.device, self.model.torch_dtype
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device: cuda requested but torch sees no CUDA device")
        kwargs = dict(dtype=dtype, attn_implementation=self.options.attn_implementation)
        if self.model.weights == "random":
            # Built on meta, then every value drawn from harness.weights: the same weights every backend builds.
            model = weights.build_empty(self.model.hf_config, **kwargs)
            weights.materialize(model, device, init_range=weights.init_range_of(self.model.hf_config))
        else:
            model = AutoModelForCausalLM.from_pretrained(self.model.source, device_map=device, **kwargs)
        self._ready(model.eval().requires_grad_(False), device_sync(device))

    def _ready(self, net, sync: Callable[[], None]) -> None:
        """What `run` needs once the model is built (here or in a subclass): the module whose `generate` is
        timed, the EOS ids to mask, and how to wait for the device."""
        self.net = net
        self.eos_ids = _eos_ids(self.model.hf_config)
        pad = getattr(self.model.hf_config, "pad_token_id", None)
        self.pad_id = pad if isinstance(pad, int) else self.eos_ids[0]
        self._configs: Dict[tuple, object] = {}
        self._sync = sync

    def run(self, batch: BatchSpec) -> BatchTiming:
        import torch

        input_ids, attention_mask = self._inputs(batch)
        config = self._generation_config(batch)
        clock = StepClock(self._sync)
        with torch.inference_mode():
            if batch.seeds:
                torch.manual_seed(batch.seeds[0])  # generate samples from one global generator: a seed per batch
            self._sync()
            start = time.perf_counter()
            out = self.net.generate(input_ids, attention_mask=attention_mask, generation_config=config,
                                    streamer=clock)
            self._sync()
            end = time.perf_counter()
        generated = out[:, input_ids.shape[1]:].tolist()
        produced = tokens_produced(generated, self.eos_ids, batch.max_tokens)
        # Every sequence gets its first token in the same step; each one's last is the step of its own last token
        # (a static batch keeps stepping until its longest sequence is done).
        last = tuple(clock.stamps[n - 1] for n in produced)
        return BatchTiming(start, clock.stamps[0], max(last), end, produced,
                           request_first_token_s=(clock.stamps[0],) * batch.batch_size, request_last_token_s=last,
                           token_ids=tuple(tuple(row[:n]) for row, n in zip(generated, produced)))

    def _inputs(self, batch: BatchSpec):
        """Ids left-padded to the longest prompt, with the mask that hides the padding: generate appends
        after the last column, so every prompt must end there."""
        import torch

        width = max(batch.input_tokens)
        ids = [[self.pad_id] * (width - len(p)) + list(p) for p in batch.prompts]
        mask = [[0] * (width - len(p)) + [1] * len(p) for p in batch.prompts]
        device = self.placement.device
        return torch.tensor(ids, dtype=torch.long, device=device), torch.tensor(mask, dtype=torch.long, device=device)

    def runtime_info(self) -> dict:
        import torch

        return {"device": self.placement.device, "torch_threads": torch.get_num_threads(),
                "attn_implementation": self.net.config._attn_implementation,
                "architecture": self.built_architecture()}

    def built_architecture(self) -> Dict[str, object]:
        """The shapes of the model as built (a DeepSpeed engine wraps it in `.module`), for the manifest."""
        return architecture(getattr(self.net, "module", self.net).config)

    def close(self) -> None:
        import torch

        del self.net
        if self.placement.device == "cuda":
            torch.cuda.empty_cache()

    def _generation_config(self, batch: BatchSpec):
        """Up to the batch's largest budget; forced: EOS is masked out until then (min == max). Greedy unless the
        sweep samples (top_k 0 turns HF's default top-k of 50 off)."""
        key = (batch.max_output_tokens, batch.forced, batch.sampling)
        if key not in self._configs:
            from transformers import CompileConfig, GenerationConfig

            n, s = batch.max_output_tokens, batch.sampling
            sampling = {} if s.greedy else dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
            config = GenerationConfig(
                max_new_tokens=n, min_new_tokens=n if batch.forced else None, do_sample=not s.greedy, num_beams=1,
                use_cache=True, eos_token_id=self.eos_ids, pad_token_id=self.pad_id, **sampling,
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


def tokens_produced(generated: List[List[int]], eos_ids: List[int], budgets: Sequence[int]) -> Tuple[int, ...]:
    """Real tokens per sequence: up to and including the first EOS (the rest is padding), at most its budget."""
    eos = set(eos_ids)
    counts = []
    for row, budget in zip(generated, budgets):
        stop = next((i + 1 for i, token in enumerate(row) if token in eos), len(row))
        counts.append(min(stop, budget))
    return tuple(counts)

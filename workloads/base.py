"""The interface every workload implements, and the options every workload shares.

A workload decides what a point asks of the engine: the prompts of each batch as token ids, and
each sequence's output budget. Batches are a pure function of (point, phase, batch index) and the
sweep's seeds, so every backend, every DeepSpeed rank and a resumed run get identical inputs.
It is built once in the parent process (files read, prompts tokenized) and sent to the workers.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Dict, Generic, List, Optional, Tuple, TypeVar

import numpy as np

from harness.config.stream import StreamConfig, replay_trace
from harness.config.sweep import SweepConfig
from harness.config.sweep_values import NO_OUTPUT_LENGTH
from harness.config.stream.traces import MOONCAKE_BLOCK_TOKENS, Trace
from harness.errors import UserError
from harness.fields import opt
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint
from harness.scenarios.arrivals import stream_arrivals
from harness.scenarios.batch import BatchSpec, Sampling
from harness.scenarios.stream import StreamSpec
from workloads.prefixes import PREFIX_KEY, PrefixOptions, make_prefixes, validate_prefix

PHASES = {"warmup": 0, "timed": 1}


@dataclass
class WorkloadOptions:
    prompts: str = opt("random", help="random (seeded token ids of exact lengths) | a path to a prompt file.")
    stop_at_eos: bool = opt(
        False, help="false: exactly output_length tokens per sequence (EOS ignored); true: up to output_length, "
        "EOS stops a sequence."
    )
    prefix: PrefixOptions = opt(factory=PrefixOptions, help="Shared prefixes in front of the prompts (prefix caching; "
                                "the prompt's own length is input_length or the file's).")

    def resolve_paths(self, config_dir: Path) -> None:
        """Make file paths usable from the working directory; called once by load_config."""
        self.prefix.resolve_paths(config_dir)

    def validate(self, config: SweepConfig) -> None:
        """Cross-field checks against the rest of the sweep; raise UserError naming the key. Loads nothing."""

    def validate_shared(self, config: SweepConfig) -> None:
        """The checks of the options every workload has (load_config calls both)."""
        validate_prefix(self.prefix, config.scenario == "stream" and config.stream.arrival == "trace")


# A workload's own options, what its `build` is given: the registry reads the `workload` section into its `Options`.
OptionsT = TypeVar("OptionsT", bound=WorkloadOptions)


class Workload(ABC, Generic[OptionsT]):
    Options: ClassVar[type] = WorkloadOptions

    def __init__(self, options: WorkloadOptions, config: SweepConfig):
        self.forced = not options.stop_at_eos
        self.pooled = config.output_lengths == [NO_OUTPUT_LENGTH]  # every entry pools: embeddings, rerank
        s = config.sampling
        self.sampling = Sampling(s.temperature, s.top_p, s.top_k)
        self.sampling_seed = s.seed
        self.prefix = options.prefix
        self.prefixes: List[List[int]] = []  # made by `make_prefixes` once the workload is built
        replaying = config.scenario == "stream" and config.stream.arrival == "trace"
        self.trace: Optional[Trace] = replay_trace(config.stream) if replaying else None
        self.time_scale = config.stream.time_scale

    @classmethod
    @abstractmethod
    def build(cls, options: OptionsT, config: SweepConfig, model: ModelSpec) -> "Workload":
        """Everything the batches need, prepared once (files read, prompts tokenized); UserError on bad input."""

    @property
    @abstractmethod
    def source_name(self) -> str:
        """What the prompts are cut from: `random`, or the prompt file and its template."""

    @abstractmethod
    def source_input_lengths(self) -> List[int]:
        """The sweep's input-length axis, before any prefix."""

    @abstractmethod
    def prompts(self, point: SweepPoint, phase: str, index: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        """The batch's prompt token ids and each sequence's output budget, before any prefix."""

    @abstractmethod
    def source_longest_input(self, point: SweepPoint) -> int:
        """The longest prompt any batch of the point holds, before any prefix."""

    @abstractmethod
    def filler(self, key: Tuple[int, ...], length: int) -> List[int]:
        """`length` token ids, the same for the same key and different for another: what shared prefixes and a
        trace's requests are made of (seeded random ids, or the prompt file's tokens)."""

    @property
    def name(self) -> str:
        """The `workload` column: the prompt source, with its shared prefixes or the trace it replays."""
        name = self.source_name
        if self.prefix.prefix_tokens:
            name += f", prefix {self.prefix.num_prefixes}x{self.prefix.prefix_tokens}"
        if self.trace is not None:
            name += f", trace {self.trace.path.name}" + (f" x{self.time_scale:g}" if self.time_scale != 1 else "")
        return name

    def input_lengths(self) -> List[int]:
        """The sweep's input-length axis: a trace's longest prompt, else the source's (a prefix is not counted)."""
        return [self.trace.max_input_tokens] if self.trace is not None else self.source_input_lengths()

    def longest_input(self, point: SweepPoint) -> int:
        """The longest prompt any batch of the point holds, prefix included: what memory estimates and engine
        limits size for."""
        if self.trace is not None:
            return self.trace.max_input_tokens
        return self.source_longest_input(point) + self.prefix.prefix_tokens

    def make_prefixes(self, model: ModelSpec) -> None:
        """The shared prefixes' ids, made once (workloads/registry.py's build_workload calls it)."""
        self.prefixes = make_prefixes(self.prefix, self.filler, model)

    def check_fits(self, max_positions: int, label: str, output_lengths: List[int]) -> None:
        """Every traced request's prompt and answer, and the longest prompt with its prefix, must fit the model's
        positions (the source checked its own prompts when it was built); name the first that does not."""
        if self.trace is not None:
            for r in self.trace.requests:
                if r.input_tokens + r.output_tokens > max_positions:
                    raise UserError(f"stream.trace: {self.trace.path}: line {r.line}: {r.input_tokens} + "
                                    f"{r.output_tokens} tokens exceeds {label}'s max_position_embeddings "
                                    f"({max_positions})")
        prefix, output = self.prefix.prefix_tokens, max(output_lengths)
        if prefix and self.trace is None:
            longest = self.longest_input(SweepPoint(max(self.input_lengths()), output, 1, self.name))
            if longest + output > max_positions:
                raise UserError(f"workload.prefix.prefix_tokens: {prefix} tokens in front of prompts of up to "
                                f"{longest - prefix}, with output {output}, make {longest + output} tokens, over "
                                f"{label}'s max_position_embeddings ({max_positions})")

    def manifest(self) -> Dict[str, Any]:
        """What a reader needs to know the prompts by, for manifest.json."""
        facts: Dict[str, Any] = {"name": self.name, "forced_output_length": self.forced}
        if self.prefix.prefix_tokens:
            facts["prefix"] = {"num_prefixes": self.prefix.num_prefixes, "prefix_tokens": self.prefix.prefix_tokens}
        if self.trace is not None:
            t = self.trace
            facts["trace"] = {"file": str(t.path), "format": t.format, "requests_replayed": len(t.requests),
                              "requests_in_file": t.requests_in_file, "time_scale": self.time_scale,
                              "span_s": t.span_s, "note": t.note}
        return facts

    def describe(self) -> str:
        """One line for the dry run: what the prompts are and how long the outputs run."""
        output = "exactly output_length tokens" if self.forced else "up to output_length tokens (EOS stops)"
        if self.pooled:
            output = "no output (embeddings, rerank)"
        text = f"{self.prompt_summary()}; {output}"
        if self.prefix.prefix_tokens:
            p = self.prefix
            text += f"; {p.num_prefixes} shared prefixes of {p.prefix_tokens} tokens in front of the prompts"
        if self.trace is not None:
            t = self.trace
            ins, outs = [r.input_tokens for r in t.requests], [r.output_tokens for r in t.requests]
            text += (f"\ntrace {t.path} ({t.format}): {len(t.requests)} requests over {t.span_s:.3g} s after "
                     f"time_scale {self.time_scale:g}, prompts {min(ins)}-{max(ins)} and outputs {min(outs)}-"
                     f"{max(outs)} tokens" + (f"; {t.note}" if t.note else ""))
        return text

    def prompt_summary(self) -> str:
        return f"{self.source_name} token ids"

    def batch(self, point: SweepPoint, phase: str, index: int) -> BatchSpec:
        prompts, max_tokens = self.prompts(point, phase, index)
        prompts = self.prefixed(prompts, first=index * len(prompts))
        return BatchSpec(prompts, max_tokens, self.forced, self.sampling, self._seeds(point, phase, index))

    def prefixed(self, prompts: List[List[int]], first: int = 0) -> List[List[int]]:
        """`prompts` with the shared prefixes in front: prompt j gets prefix (first + j) mod num_prefixes. The same
        prefixes in warm-up and timed requests: a shared system prompt is warm in a serving engine's cache."""
        if not self.prefix.prefix_tokens:
            return prompts
        heads = self.prefixes
        assert heads, "workloads/registry.py's build_workload makes the prefixes"
        return [heads[(first + j) % len(heads)] + list(prompt) for j, prompt in enumerate(prompts)]

    def stream_prompts(self, point: SweepPoint, phase: str, count: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        """A stream's prompts and budgets in arrival order: by default one batch of `count` (seeded as batches are)."""
        return self.prompts(dataclasses.replace(point, batch_size=count), phase, 0)

    def stream_messages(self, phase: str, count: int) -> Tuple[Tuple[Tuple[str, str], ...], ...]:
        """Each request's conversation in arrival order, for servers that apply their own chat template; () where
        the prompts are token ids only."""
        return ()

    def stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec:
        """The warm-up or timed request stream of a stream point: prompts and arrival times, both seeded, or a
        trace's."""
        if self.trace is not None:
            return self.trace_stream(point, phase, stream)
        rate = point.request_rate
        assert rate is not None  # a rate search (`request_rates: auto`) runs each probe at a rate of its own
        arrivals = stream_arrivals(stream, rate, phase)  # arrival: stages: as many as its schedule holds
        count = len(arrivals)
        prompts, max_tokens = self.stream_prompts(point, phase, count)
        requests = BatchSpec(self.prefixed(prompts), max_tokens, self.forced, self.sampling,
                             self.stream_seeds(point, phase, count), self.stream_messages(phase, count))
        return StreamSpec(requests, arrivals, point.max_concurrency, release=stream.release)

    @property
    def unseeded(self) -> bool:
        """Greedy needs no seeds; `sampling.seed: null` asks for none: vLLM draws a seeded request's noise on its own,
        one request at a time each step (vllm/v1/sample/ops/topk_topp_sampler.py, random_sample), and on GPU a seeded
        batch leaves FlashInfer's sampler for the PyTorch one."""
        return self.sampling.greedy or self.sampling_seed is None

    def stream_seeds(self, point: SweepPoint, phase: str, count: int) -> Tuple[int, ...]:
        return self._seeds(dataclasses.replace(point, batch_size=count), phase, 0)

    def _seeds(self, point: SweepPoint, phase: str, index: int) -> Tuple[int, ...]:
        """One sampling seed per sequence of the batch, or none (see `unseeded`)."""
        seed = None if self.unseeded else self.sampling_seed  # seeded: sampling.seed is set (see `unseeded`)
        return () if seed is None else batch_seeds(seed, point, phase, index)

    def trace_stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec:
        """The trace's window at its (scaled) times, each request with its traced lengths; the warm-up stream is the
        window's first `stream.num_warmup_requests`. Prompts are cut from `filler`: per 512-token block where the trace
        gives hash_ids (equal ids, equal blocks: its shared prefixes), else per request; warm-up blocks differ from
        timed ones, so the warm-up leaves nothing in a cache for the timed requests to hit."""
        trace = self.trace
        assert trace is not None  # `stream` replays the trace of a workload that has one
        chosen = trace.requests if phase == "timed" else trace.requests[:stream.num_warmup_requests]
        prompts = [self._traced_prompt(r, i, PHASES[phase]) for i, r in enumerate(chosen)]
        max_tokens = tuple(r.output_tokens for r in chosen)
        requests = BatchSpec(prompts, max_tokens, self.forced, self.sampling,
                             self.stream_seeds(point, phase, len(chosen)))
        traced = tuple(r.adapter for r in chosen if r.adapter is not None)  # lora.mix: trace names them
        return StreamSpec(requests, tuple(r.time_s for r in chosen), point.max_concurrency, release=stream.release,
                          traced_adapters=traced if len(traced) == len(chosen) else ())

    def _traced_prompt(self, request, index: int, phase: int) -> List[int]:
        if not request.hash_ids:
            return self.filler((REQUEST_KEY, phase, index), request.input_tokens)
        ids: List[int] = []
        for h in request.hash_ids:
            ids += self.filler((BLOCK_KEY, phase, h), MOONCAKE_BLOCK_TOKENS)
        return ids[:request.input_tokens]


# What `filler` keys start with: a trace's block, a trace's request without blocks (a shared prefix's: PREFIX_KEY).
BLOCK_KEY, REQUEST_KEY = PREFIX_KEY + 1, PREFIX_KEY + 2


def batch_seeds(seed: int, point: SweepPoint, phase: str, index: int) -> Tuple[int, ...]:
    """One sampling seed per sequence, from a stream independent of the prompt draws (its own spawn key)."""
    # A batch's point has its size: a batch search's probes each their own (the runner's), a stream its count.
    assert point.batch_size is not None
    entropy = [seed, point.batch_size, point.input_length, point.output_length, PHASES[phase], index]
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(1,)))
    return tuple(int(x) for x in rng.integers(0, 2**31 - 1, size=point.batch_size))

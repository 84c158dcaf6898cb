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
from typing import Any, ClassVar, Dict, List, Tuple

import numpy as np

from harness.config.stream import StreamConfig
from harness.config.sweep import SweepConfig
from harness.fields import opt
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec, Sampling
from harness.scenarios.stream import StreamSpec

PHASES = {"warmup": 0, "timed": 1}


@dataclass
class WorkloadOptions:
    prompts: str = opt("random", help="random (seeded token ids of exact lengths) | a path to a prompt file.")
    stop_at_eos: bool = opt(
        False, help="false: exactly output_length tokens per sequence (EOS ignored); true: up to output_length, "
        "EOS stops a sequence."
    )

    def resolve_paths(self, config_dir: Path) -> None:
        """Make file paths usable from the working directory; called once by load_config."""

    def validate(self, config: SweepConfig) -> None:
        """Cross-field checks against the rest of the sweep; raise UserError naming the key. Loads nothing."""


class Workload(ABC):
    Options: ClassVar[type] = WorkloadOptions

    def __init__(self, options: WorkloadOptions, config: SweepConfig):
        self.forced = not options.stop_at_eos
        s = config.sampling
        self.sampling = Sampling(s.temperature, s.top_p, s.top_k)
        self.sampling_seed = s.seed

    @classmethod
    @abstractmethod
    def build(cls, options: WorkloadOptions, config: SweepConfig, model: ModelSpec) -> "Workload":
        """Everything the batches need, prepared once (files read, prompts tokenized); UserError on bad input."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The `workload` column: `random`, or the prompt file and its template."""

    @abstractmethod
    def input_lengths(self) -> List[int]:
        """The sweep's input-length axis."""

    @abstractmethod
    def prompts(self, point: SweepPoint, phase: str, index: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        """The batch's prompt token ids and each sequence's output budget."""

    @abstractmethod
    def longest_input(self, point: SweepPoint) -> int:
        """The longest prompt any batch of the point holds: what memory estimates and engine limits size for."""

    def manifest(self) -> Dict[str, Any]:
        """What a reader needs to know the prompts by, for manifest.json."""
        return {"name": self.name, "forced_output_length": self.forced}

    def describe(self) -> str:
        """One line for the dry run: what the prompts are and how long the outputs run."""
        output = "exactly output_length tokens" if self.forced else "up to output_length tokens (EOS stops)"
        return f"{self.prompt_summary()}; {output}"

    def prompt_summary(self) -> str:
        return f"{self.name} token ids"

    def batch(self, point: SweepPoint, phase: str, index: int) -> BatchSpec:
        prompts, max_tokens = self.prompts(point, phase, index)
        seeds = () if self.sampling.greedy else batch_seeds(self.sampling_seed, point, phase, index)
        return BatchSpec(prompts, max_tokens, self.forced, self.sampling, seeds)

    def stream_prompts(self, point: SweepPoint, phase: str, count: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        """A stream's prompts and budgets in arrival order: by default one batch of `count` (seeded as batches are)."""
        return self.prompts(dataclasses.replace(point, batch_size=count), phase, 0)

    def stream_messages(self, phase: str, count: int) -> Tuple[Tuple[Tuple[str, str], ...], ...]:
        """Each request's conversation in arrival order, for servers that apply their own chat template; () where
        the prompts are token ids only."""
        return ()

    def stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec:
        """The warm-up or timed request stream of a stream point: prompts and arrival times, both seeded."""
        count = stream.num_requests if phase == "timed" else stream.num_warmup_requests
        prompts, max_tokens = self.stream_prompts(point, phase, count)
        sized = dataclasses.replace(point, batch_size=count)
        seeds = () if self.sampling.greedy else batch_seeds(self.sampling_seed, sized, phase, 0)
        requests = BatchSpec(prompts, max_tokens, self.forced, self.sampling, seeds, self.stream_messages(phase, count))
        arrivals = arrival_times(stream.arrival, point.request_rate, count, stream.seed, phase)
        return StreamSpec(requests, arrivals, point.max_concurrency)


def batch_seeds(seed: int, point: SweepPoint, phase: str, index: int) -> Tuple[int, ...]:
    """One sampling seed per sequence, from a stream independent of the prompt draws (its own spawn key)."""
    entropy = [seed, point.batch_size, point.input_length, point.output_length, PHASES[phase], index]
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(1,)))
    return tuple(int(x) for x in rng.integers(0, 2**31 - 1, size=point.batch_size))

"""The `random` workload: seeded random token ids of exact lengths, the pure speed sweep.

Seeding per (point, phase, batch) rather than per run means a resumed sweep, a second
backend and every DeepSpeed rank see exactly the same inputs, and warm-up batches never
repeat a timed one (which would flatter any engine with a prefix cache). Named random_ids,
not random, so nothing can shadow the standard library's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Tuple

import numpy as np

from harness.config.sweep import SweepConfig
from harness.errors import UserError
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint
from workloads.base import PHASES, Workload, WorkloadOptions


@dataclass
class RandomOptions(WorkloadOptions):
    def validate(self, config: SweepConfig) -> None:
        if config.input_lengths is None and not (config.scenario == "stream" and config.stream.arrival == "trace"):
            raise UserError("input_lengths: required with random prompts (workload.prompts: random)")


class RandomWorkload(Workload[RandomOptions]):
    Options = RandomOptions

    def __init__(self, options: RandomOptions, config: SweepConfig, allowed: np.ndarray):
        super().__init__(options, config)
        self.allowed, self.seed, self._input_lengths = allowed, config.seed, list(config.input_lengths or ())

    @classmethod
    def build(cls, options: RandomOptions, config: SweepConfig, model: ModelSpec) -> "RandomWorkload":
        if config.input_lengths is not None:  # else a trace gives the lengths, checked per request
            check_lengths(config, model)
        return cls(options, config, allowed_token_ids(model.config.vocab_size, model.special_token_ids))

    @property
    def source_name(self) -> str:
        return "random"

    def source_input_lengths(self) -> List[int]:
        return self._input_lengths

    def prompts(self, point: SweepPoint, phase: str, index: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        size = point.batch_size
        assert size is not None  # a batch search's probes have theirs (the runner's); a stream's: stream_prompts
        ids = make_prompts(self.allowed, self.seed, size, point.input_length, point.output_length, phase, index)
        return ids, (point.output_length,) * size

    def source_longest_input(self, point: SweepPoint) -> int:
        return point.input_length

    def filler(self, key: Tuple[int, ...], length: int) -> List[int]:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, *key], spawn_key=(3,)))
        return self.allowed[rng.integers(0, len(self.allowed), size=length)].tolist()


def check_lengths(config: SweepConfig, model: ModelSpec) -> None:
    """Every input + output must fit the model's positions; name the worst pair if not."""
    inputs, outputs = config.input_lengths, config.output_lengths
    # `build` checks given input_lengths only; load_config requires output_lengths (or takes them from a trace)
    assert inputs is not None and outputs is not None
    longest = max(inputs) + max(outputs)
    if longest > model.max_positions:
        raise UserError(
            f"input_lengths/output_lengths: {max(inputs)} + {max(outputs)} = {longest} "
            f"tokens exceeds {model.label}'s max_position_embeddings ({model.max_positions})"
        )


def allowed_token_ids(vocab_size: int, special_ids: Iterable[int]) -> np.ndarray:
    """The vocabulary minus BOS/EOS/PAD, which would change what the model does mid-prompt."""
    return np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.fromiter(special_ids, dtype=np.int64))


def make_prompts(
    allowed: np.ndarray, seed: int, batch_size: int, input_length: int, output_length: int, phase: str, index: int
) -> List[List[int]]:
    rng = np.random.default_rng([seed, batch_size, input_length, output_length, PHASES[phase], index])
    return allowed[rng.integers(0, len(allowed), size=(batch_size, input_length))].tolist()

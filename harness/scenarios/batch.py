"""What a backend is given for one batch and what it hands back: host-clock timestamps.

All timestamps are `time.perf_counter()` seconds of the process that calls `run`; a
backend on an accelerator synchronizes the device before reading the clock, so a
stamp means "the work before it is done", not "the work before it was queued".
The definitions of TTFT and TPOT below are the product's contract (docs/measurement.md)
and the same for every backend.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Sampling:
    """How every backend picks the next token. The default is greedy, where engines can be cross-checked."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


GREEDY = Sampling()


@dataclass(frozen=True)
class BatchSpec:
    """Prompts submitted together, with each sequence's output budget.

    `forced`: every sequence produces exactly its `max_tokens` (EOS ignored); otherwise EOS may stop
    it earlier. `seeds`: one sampling seed per sequence (derived from `sampling.seed`), so a sampled
    run repeats wherever the engine takes per-request seeds. `messages`: where the prompts come from a prompt file,
    each one's conversation as (role, content) pairs, for a server that applies its own chat template (the token
    ids are the harness's rendering of it through the tokenizer's); () for token ids only. `answer_schema`: the
    workload's `json_schema` as JSON text, which a server is asked to hold every answer to and each answer is checked
    against; "" for none. `answer_tools`: the workload's `tools` as JSON text, which every answer is asked to call
    and each answer's calls are checked against; "" for none.
    """

    prompts: Sequence[Sequence[int]]
    max_tokens: Tuple[int, ...]
    forced: bool = True
    sampling: Sampling = GREEDY
    seeds: Tuple[int, ...] = ()
    messages: Tuple[Tuple[Tuple[str, str], ...], ...] = ()
    answer_schema: str = ""
    answer_tools: str = ""

    def __post_init__(self):
        assert len(self.max_tokens) == len(self.prompts), "one output budget per prompt"
        assert not self.messages or len(self.messages) == len(self.prompts), "one conversation per prompt"

    @property
    def batch_size(self) -> int:
        return len(self.prompts)

    @property
    def input_tokens(self) -> Tuple[int, ...]:
        return tuple(len(p) for p in self.prompts)

    @property
    def max_output_tokens(self) -> int:
        return max(self.max_tokens)

    @property
    def uniform(self) -> bool:
        """Every prompt the same length: no padding needed."""
        return len(set(self.input_tokens)) == 1


@dataclass(frozen=True)
class SpecCounts:
    """Speculative decoding's counters over some sequences, from the engine (docs/measurement.md, "Speculative
    decoding"). `draft_steps`: a sequence's target forward passes that verified at least one proposed token;
    `proposed`: draft tokens proposed; `accepted`: of those, the ones the target accepted."""

    draft_steps: int = 0
    proposed: int = 0
    accepted: int = 0

    def __add__(self, other: "SpecCounts") -> "SpecCounts":
        return SpecCounts(self.draft_steps + other.draft_steps, self.proposed + other.proposed,
                          self.accepted + other.accepted)

    def __sub__(self, other: "SpecCounts") -> "SpecCounts":
        return SpecCounts(self.draft_steps - other.draft_steps, self.proposed - other.proposed,
                          self.accepted - other.accepted)


@dataclass(frozen=True)
class LogitsProbe:
    """What a model computes for a batch's prompts, to hold one entry's model against another's on the same inputs
    (docs/measurement.md, "Quantization"): per sequence, the last prompt position's logits (`last_logits`, one row of
    vocab_size floats each) and the argmax at every prompt position (`top1`)."""

    last_logits: Any  # numpy float32 array, sequences x vocab_size
    top1: Tuple[Tuple[int, ...], ...]


# A probe looks at this many sequences of a batch: enough positions to count agreement, and last-position logits of
# a few vocab-sized rows, which travel from the worker to the parent.
PROBE_SEQUENCES = 8


def probed(batch: "BatchSpec") -> "BatchSpec":
    """The batch cut to the sequences a probe looks at."""
    n = PROBE_SEQUENCES
    return dataclasses.replace(batch, prompts=list(batch.prompts[:n]), max_tokens=tuple(batch.max_tokens[:n]),
                               seeds=tuple(batch.seeds[:n]), messages=tuple(batch.messages[:n]))


@dataclass(frozen=True)
class BatchTiming:
    """Host-clock stamps of one batch, plus what it produced.

    `first_token_s`: every sequence of the batch has its first output token (prefill done).
    `last_token_s`: the batch's last output token has arrived.
    `output_tokens`: tokens each sequence actually produced, checked against the request.
    `request_first_token_s`, `request_last_token_s`: per-sequence stamps, where the engine gives them.
    `token_ids`: the generated ids per sequence, for cross-checking engines (not timed, not written per batch).
    `spec`: the speculative-decoding counters of the batch, from an entry that speculates.
    `cached_tokens`: per sequence, prompt tokens the engine served from its prefix cache, where it says.
    """

    start_s: float
    first_token_s: float
    last_token_s: float
    end_s: float
    output_tokens: Tuple[int, ...]
    request_first_token_s: Optional[Tuple[float, ...]] = None
    request_last_token_s: Optional[Tuple[float, ...]] = None
    token_ids: Optional[Tuple[Tuple[int, ...], ...]] = field(default=None, repr=False)
    spec: Optional[SpecCounts] = None
    cached_tokens: Optional[Tuple[int, ...]] = None

    @property
    def latency_ms(self) -> float:
        return (self.end_s - self.start_s) * 1e3

    @property
    def ttft_ms(self) -> float:
        return (self.first_token_s - self.start_s) * 1e3

    @property
    def tpot_ms(self) -> Optional[float]:
        """Decode time per step after the first token: the longest sequence sets how many steps the batch ran."""
        steps = max(self.output_tokens) - 1
        if steps < 1:
            return None
        return (self.last_token_s - self.first_token_s) * 1e3 / steps

    def request_ttfts_ms(self) -> Optional[Tuple[float, ...]]:
        if self.request_first_token_s is None:
            return None
        return tuple((t - self.start_s) * 1e3 for t in self.request_first_token_s)

    def request_latencies_ms(self) -> Optional[Tuple[float, ...]]:
        """Submission to each sequence's own last token (a finished sequence stops its clock)."""
        if self.request_last_token_s is None:
            return None
        return tuple((t - self.start_s) * 1e3 for t in self.request_last_token_s)

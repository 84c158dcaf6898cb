"""A task an entry answers for its accuracy (docs/measurement.md, "Accuracy"): its prompts as the model's token ids,
each answer's ids, and what ends an answer; as static batches in a batch sweep, as one stream in a stream sweep. Read
from a task file by workloads/tasks.py; answered through the loaded engine by harness/measure/quality.py
(score_tasks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from harness.scenarios.batch import GREEDY, BatchSpec, Sampling
from harness.scenarios.stream import StreamSpec


@dataclass(frozen=True)
class AccuracyTask:
    name: str  # the file's stem: the `task` of the manifest's scores
    path: str
    prompts: Tuple[Tuple[int, ...], ...]
    answers: Tuple[Tuple[int, ...], ...]  # each answer's ids, as the tokenizer writes its text (no specials)
    stop_ids: Tuple[int, ...]  # the model's EOS ids: an answer ends at the first
    sampling: Sampling = GREEDY
    seeds: Tuple[int, ...] = ()  # one per example where sampled and seeded
    # Each prompt as one user message, for a server that applies its own chat template (an openai entry's chat
    # endpoint); the ids above are what every other engine is given.
    messages: Tuple[Tuple[Tuple[str, str], ...], ...] = ()

    def __post_init__(self):
        assert len(self.prompts) == len(self.answers) > 0, "one answer per prompt, and at least one"
        assert not self.seeds or len(self.seeds) == len(self.prompts), "one seed per example, or none"

    @property
    def longest_prompt(self) -> int:
        return max(map(len, self.prompts))

    @property
    def longest_answer(self) -> int:
        """An answer's budget: its tokens and one more, where the model should say EOS."""
        return max(map(len, self.answers)) + 1

    def batches(self, batch_size: int):
        """(first example's index, BatchSpec) per `batch_size` examples; EOS may end each answer early."""
        for start in range(0, len(self.prompts), batch_size):
            answers = self.answers[start:start + batch_size]
            yield start, BatchSpec(self.prompts[start:start + batch_size], tuple(len(a) + 1 for a in answers),
                                   forced=False, sampling=self.sampling, seeds=self.seeds[start:start + batch_size])

    def stream(self, concurrency: int) -> StreamSpec:
        """Every example as one stream, in a stream sweep: all due at once, `concurrency` in flight (the rest wait at
        the client), each answer's token ids asked for."""
        requests = BatchSpec(self.prompts, tuple(len(a) + 1 for a in self.answers), forced=False,
                             sampling=self.sampling, seeds=self.seeds, messages=self.messages)
        return StreamSpec(requests, (0.0,) * len(self.prompts), max_concurrency=concurrency, answer_ids=True)


@dataclass(frozen=True)
class LmEvalTasks:
    """`accuracy.lm_eval_tasks` as an entry runs them: lm-evaluation-harness itself sends each task's prompts through
    the entry's server and scores the answers by its own metrics (docs/measurement.md, "Accuracy")."""

    names: Tuple[str, ...]
    include_path: Optional[str]  # a folder of task YAMLs of the user's own
    num_fewshot: Optional[int]  # None: each task's own
    limit: Optional[int]  # each task's first examples (None: all)
    concurrency: int  # requests in flight (lm-eval's num_concurrent)
    chat_template: bool  # the tokenizer's own chat template applied to every prompt
    tokenizer: str  # the model's tokenizer (a folder or hub id), which lm-eval counts and templates with


def answered(generated: Sequence[int], answer: Sequence[int], stop_ids: Sequence[int]) -> bool:
    """Exact match: the tokens before the first EOS (or all of them) are the answer's. An answer followed by anything
    but EOS is wrong, as lm-evaluation-harness's exact match with EOS as the stop sequence scores it."""
    end = next((i for i, t in enumerate(generated) if t in stop_ids), len(generated))
    return tuple(generated[:end]) == tuple(answer)


@dataclass(frozen=True)
class TaskScore:
    """How many of a task's examples (or of every task's, pooled) the engine answered exactly."""

    task: str
    examples: int
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.examples

"""The `accuracy` section: which task files each entry answers, once after loading, through the engine it timed
(docs/measurement.md, "Accuracy"). Reading the tasks is workloads/tasks.py's, scoring them
harness/measure/quality.py's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from harness.config.sections import SamplingConfig
from harness.errors import UserError
from harness.fields import opt


@dataclass
class AccuracyConfig:
    tasks: List[str] = opt(
        factory=list, help="Task files, JSON lines of {\"prompt\": TEXT, \"answer\": TEXT}: every entry answers each "
        "prompt greedily through the engine instance it timed (its quantization, KV cache and speculative settings "
        "included) or, for an openai entry, the server it timed, and an answer counts when its tokens are the "
        "answer's, then EOS or the end of its budget. None by default: no accuracy.")
    template: str = opt("chat", help="How a prompt becomes the model's input, as workload.template takes it: chat "
                        "(the tokenizer's chat template), none (the text and the tokenizer's own BOS), llama-2, "
                        "llama-3, mistral, chatml.")
    limit: Optional[int] = opt(None, ge=1, help="Each task's first this-many examples (default: all of them).")
    batch_size: int = opt(16, ge=1, help="Examples sent to the engine together: a static batch's size, or in a stream "
                          "sweep the requests in flight at once (the answers do not depend on it beyond the engine's "
                          "own batch invariance).")
    sampling: SamplingConfig = opt(factory=SamplingConfig, help="How the answers are decoded, as the sweep's own "
                                   "`sampling` takes it; greedy by default. Sampled, each example has its own seed "
                                   "from sampling.seed, so a sampled score repeats where the engine allows.")

    def resolve_paths(self, config_dir: Path) -> None:
        """A relative task path is looked for beside the YAML first, then from the working directory."""
        self.tasks = [os.path.relpath(config_dir / t) if t.strip() and not Path(t).is_absolute()
                      and (config_dir / t).exists() else t for t in self.tasks]


def validate_accuracy(accuracy: AccuracyConfig) -> None:
    """The files; the template is the task reader's to check (workloads/tasks.py), where the templates are."""
    for i, path in enumerate(accuracy.tasks):
        if not path.strip():
            raise UserError(f"accuracy.tasks[{i}]: is empty; give a task file (JSON lines of prompt and answer)")
        if os.path.isdir(path):
            raise UserError(f"accuracy.tasks[{i}]: {path!r} is a folder; give a task file (JSON lines)")
        if not os.path.isfile(path):
            raise UserError(f"accuracy.tasks[{i}]: no such file {path!r}")
    names = [Path(p).stem for p in accuracy.tasks]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UserError(f"accuracy.tasks: two files are both named {repeated[0]!r} (a task is named by its file's "
                        "stem in results); rename one")

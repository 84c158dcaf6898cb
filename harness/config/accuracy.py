"""The `accuracy` section: which task files each entry answers, once after loading, through the engine it timed
(docs/measurement.md, "Accuracy"). Reading the tasks is workloads/tasks.py's, scoring them
harness/measure/quality.py's."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from harness.files import beside_yaml
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

    lm_eval_tasks: List[str] = opt(
        factory=list, help="lm-evaluation-harness task names (gsm8k, mmlu, ...; lm-eval runs in its own venv, "
        ".venv-eval, which make setup builds), scored by lm-eval itself through each openai entry's server (its local-completions model at the server's "
        "/v1/completions); their datasets must be downloadable here or in the datasets cache. Other entries are "
        "not scored by it (the manifest says so).")
    lm_eval_include: Optional[str] = opt(None, help="A folder of lm-eval task YAMLs (lm-eval's --include_path): "
                                         "tasks of your own, over local files, named in lm_eval_tasks.")
    num_fewshot: Optional[int] = opt(None, ge=0, le=1000, help="lm-eval's few-shot examples per task (default: each "
                                     "task's own).")

    def resolve_paths(self, config_dir: Path) -> None:
        """A relative task path is looked for beside the YAML first, then from the working directory."""
        self.tasks = [beside_yaml(config_dir, t) for t in self.tasks]
        self.lm_eval_include = beside_yaml(config_dir, self.lm_eval_include)


def validate_accuracy(accuracy: AccuracyConfig) -> None:
    """The files; the template is the task reader's to check (workloads/tasks.py), where the templates are."""
    for i, path in enumerate(accuracy.tasks):
        if not path.strip():
            raise UserError(f"accuracy.tasks[{i}]: is empty; give a task file (JSON lines of prompt and answer)")
        if os.path.isdir(path):
            raise UserError(f"accuracy.tasks[{i}]: {path!r} is a folder; give a task file (JSON lines)")
        if not os.path.isfile(path):
            raise UserError(f"accuracy.tasks[{i}]: no such file {path!r}")
    _validate_lm_eval(accuracy)
    names = [Path(p).stem for p in accuracy.tasks]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UserError(f"accuracy.tasks: two files are both named {repeated[0]!r} (a task is named by its file's "
                        "stem in results); rename one")


def lm_eval_python() -> Path:
    """The interpreter lm-evaluation-harness runs in: its own venv beside the repository's (`.venv-eval`), or
    BENCH_LM_EVAL_PYTHON. Kept apart from the engines' environment, where the packages lm-eval brings (scikit-learn
    above all) would be imported by transformers in every worker."""
    given = os.environ.get("BENCH_LM_EVAL_PYTHON")
    return Path(given) if given else Path(__file__).resolve().parents[2] / ".venv-eval" / "bin" / "python"


def _validate_lm_eval(accuracy: AccuracyConfig) -> None:
    """The names' shape, the include folder, lm-eval installed, a template it can apply; the names themselves are
    checked against lm-eval's task list when the plan is made (importing it takes seconds)."""
    for i, name in enumerate(accuracy.lm_eval_tasks):
        if not name.strip():
            raise UserError(f"accuracy.lm_eval_tasks[{i}]: is empty; give an lm-evaluation-harness task name")
    include = accuracy.lm_eval_include
    if include is not None and not os.path.isdir(include):
        raise UserError(f"accuracy.lm_eval_include: no such folder {include!r} (a folder of lm-eval task YAMLs)")
    if include is not None and not accuracy.lm_eval_tasks:
        raise UserError("accuracy.lm_eval_include: names a task folder, but lm_eval_tasks names no task to run")
    if accuracy.num_fewshot is not None and not accuracy.lm_eval_tasks:
        raise UserError("accuracy.num_fewshot: applies to lm_eval_tasks, and none is named")
    if not accuracy.lm_eval_tasks:
        return
    if not lm_eval_python().is_file():
        raise UserError(f"accuracy.lm_eval_tasks: lm-evaluation-harness is not installed ({lm_eval_python()} is "
                        "missing: make setup builds it from requirements-eval.txt, or set BENCH_LM_EVAL_PYTHON)")
    if accuracy.template not in ("chat", "none"):
        raise UserError(f"accuracy.template: {accuracy.template!r} with lm_eval_tasks; lm-eval applies the "
                        "tokenizer's own chat template (chat) or none")

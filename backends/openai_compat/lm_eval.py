"""lm-evaluation-harness's tasks scored through the server an `openai` entry times (docs/measurement.md, "Accuracy"):
lm-eval's own `local-completions` model sends each task's prompts to the server's /v1/completions, as its README
recommends for served models, and lm-eval scores the answers by each task's own metrics. What comes back is lm-eval's
results JSON, kept in the manifest without its per-sample logs, and one row per task and metric for accuracy.csv.

lm-eval runs in an interpreter of its own (`.venv-eval`, scripts/lm_eval_score.py): what it installs (scikit-learn,
scipy, pyarrow) would be imported by transformers in every worker of the engines' environment."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from harness.config.accuracy import AccuracyConfig, lm_eval_python
from harness.errors import UserError, did_you_mean
from harness.model.spec import ModelSpec
from harness.model.tokenizer import tokenizer_source
from harness.scenarios.accuracy import LmEvalTasks

SCORER = Path(__file__).resolve().parents[2] / "scripts" / "lm_eval_score.py"
# lm-eval's results JSON, less what is per sample or per task configuration (the task YAMLs lm-eval ships).
DROPPED = ("samples", "configs")
TASK_LIST_TIMEOUT_S = 300.0


def plan_tasks(config: AccuracyConfig, model: ModelSpec) -> Optional[LmEvalTasks]:
    """accuracy.lm_eval_tasks for `model`, before any engine loads: each name checked against the tasks lm-eval will
    look it up in (lm_eval_include's, then lm-eval's own), with the model's tokenizer; None when none is asked for."""
    if not config.lm_eval_tasks:
        return None
    known = task_names(config.lm_eval_include, tuple(config.lm_eval_tasks))
    for i, name in enumerate(config.lm_eval_tasks):
        if name not in known:
            raise UserError(f"accuracy.lm_eval_tasks[{i}]: {name!r} is not an lm-evaluation-harness task or group"
                            f"{did_you_mean(name, known)} (`lm_eval ls tasks` lists them; a task of your own goes in "
                            "accuracy.lm_eval_include)")
    assert model.section is not None  # resolve_model records every model's section
    tokenizer = tokenizer_source(model.section)
    if tokenizer is None:
        raise UserError(f"accuracy.lm_eval_tasks: lm-eval needs {model.label}'s tokenizer, and its preset ships "
                        "none (set model.tokenizer)")
    tokenizer = str(Path(tokenizer).resolve()) if Path(tokenizer).expanduser().is_dir() else tokenizer
    include = str(Path(config.lm_eval_include).resolve()) if config.lm_eval_include else None
    return LmEvalTasks(tuple(config.lm_eval_tasks), include, config.num_fewshot, config.limit, config.batch_size,
                       config.template == "chat", tokenizer)


@functools.lru_cache(maxsize=4)
def task_names(include_path: Optional[str], names: Tuple[str, ...]) -> List[str]:
    """The tasks and groups lm-eval would look `names` up in, read once per process from lm-eval's interpreter."""
    argv = [str(lm_eval_python()), str(SCORER), "tasks", include_path or "-", *names]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TASK_LIST_TIMEOUT_S)
    if done.returncode != 0:
        raise UserError(f"accuracy.lm_eval_tasks: lm-eval could not list its tasks ({_tail(done.stderr)})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def evaluate(completions_url: str, served_model: str, tasks: LmEvalTasks,
             headers: Dict[str, str]) -> Dict[str, object]:
    """Run lm-eval on `tasks` against the server, untimed; the manifest's `lm_eval`: how it ran, a row per task and
    metric, and lm-eval's own results. `headers`: the entry's Authorization, if any (lm-eval's auth_token)."""
    model_args: Dict[str, object] = {"base_url": completions_url, "model": served_model, "tokenizer": tasks.tokenizer,
                                     "tokenizer_backend": "huggingface", "num_concurrent": tasks.concurrency,
                                     "max_retries": 1}
    bearer = headers.get("Authorization", "")
    if bearer.startswith("Bearer "):
        model_args["auth_token"] = bearer[len("Bearer "):]
    spec = {"model_args": model_args, "tasks": list(tasks.names), "num_fewshot": tasks.num_fewshot,
            "limit": tasks.limit, "include_path": tasks.include_path, "chat_template": tasks.chat_template}
    with tempfile.TemporaryDirectory(prefix="bench-lm-eval-") as tmp:
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        out = Path(tmp) / "results.json"
        done = subprocess.run([str(lm_eval_python()), str(SCORER), "run", str(Path(tmp) / "spec.json"), str(out)],
                              capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"lm-evaluation-harness exited with code {done.returncode}: {_tail(done.stderr)}")
        results = json.loads(out.read_text())
    how = (f"lm-evaluation-harness {results.get('lm_eval_version', '?')} (its local-completions model) through the "
           f"server this entry timed ({completions_url}), {tasks.concurrency} requests in flight"
           f"{', chat template applied' if tasks.chat_template else ''}; each task's own metrics and decoding")
    kept = {key: value for key, value in results.items() if key not in DROPPED}
    return {"evaluated": how, "tasks": task_rows(results), "results": kept}


def task_rows(results: dict) -> List[Dict[str, object]]:
    """One row per task and metric (`exact_match,strict-match`: lm-eval's metric and filter), with its standard
    error as lm-eval gives it and the examples it scored."""
    rows = []
    samples = results.get("n-samples", {})
    for task, figures in results.get("results", {}).items():
        examples = (samples.get(task) or {}).get("effective")
        for key, value in figures.items():
            metric, comma, where = key.partition(",")  # a metric is "name,filter"; `alias`, `sample_len` are not
            if not comma or metric.endswith("_stderr") or not isinstance(value, (int, float)):
                continue
            stderr = figures.get(f"{metric}_stderr,{where}")
            rows.append({"task": task, "metric": key, "examples": examples, "value": float(value),
                         "stderr": float(stderr) if isinstance(stderr, (int, float)) and math.isfinite(stderr)
                         else None})
    return rows


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " ".join(" ".join(lines[-3:]).split())[-400:] or "no output"

"""`accuracy.tasks`: task files read, checked and tokenized once, before any engine loads, so a bad line is one error
naming the file and line (docs/measurement.md, "Accuracy").

A task file is JSON lines, one example per non-blank line: `{"prompt": "text", "answer": "text"}`, both non-empty
strings, no other key. The prompt is rendered as one user message with `accuracy.template` (as a prompt file's is with
`workload.template`) and tokenized with the model's tokenizer; the answer is tokenized as plain text, without
specials, and the model is expected to say it and then EOS.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from harness.config.accuracy import AccuracyConfig
from harness.errors import UserError
from harness.model.spec import ModelSpec
from harness.model.tokenizer import load_tokenizer
from harness.scenarios.accuracy import AccuracyTask
from harness.scenarios.batch import Sampling
from workloads.prompt_file import decode, json_object, numbered_lines, read_bytes
from workloads.templates import TEMPLATES, render

KEYS = ("prompt", "answer")


def load_tasks(config: AccuracyConfig, model: ModelSpec) -> Tuple[AccuracyTask, ...]:
    """Every task of the section, for `model`: () when none is asked for."""
    if not config.tasks:
        return ()
    if config.template not in TEMPLATES:
        raise UserError(f"accuracy.template: {config.template!r} is not one of {', '.join(TEMPLATES)}")
    tokenizer = load_tokenizer(model)
    stop_ids = _stop_ids(tokenizer, model)
    if not stop_ids:
        raise UserError(f"accuracy.tasks: {model.label}'s tokenizer and config name no EOS token, so an answer has "
                        "no end to be scored at")
    tasks = []
    for i, path in enumerate(config.tasks):
        examples = read_task_file(Path(path), f"accuracy.tasks[{i}]: {path}")[:config.limit]
        prompts = tuple(_prompt_ids(prompt, config.template, tokenizer) for prompt, _ in examples)
        answers = tuple(tuple(tokenizer(answer, add_special_tokens=False)["input_ids"]) for _, answer in examples)
        sampling = Sampling(config.sampling.temperature, config.sampling.top_p, config.sampling.top_k)
        seed = config.sampling.seed
        seeds = () if sampling.greedy or seed is None else tuple(seed + k for k in range(len(prompts)))
        messages = tuple(((("user", prompt),)) for prompt, _ in examples)
        task = AccuracyTask(Path(path).stem, path, prompts, answers, stop_ids, sampling, seeds, messages)
        if task.longest_prompt + task.longest_answer > model.max_positions:
            raise UserError(f"accuracy.tasks[{i}]: {path}'s longest prompt ({task.longest_prompt} tokens) and answer "
                            f"({task.longest_answer} with EOS) pass {model.label}'s max_position_embeddings "
                            f"({model.max_positions})")
        tasks.append(task)
    return tuple(tasks)


def read_task_file(path: Path, where: str) -> List[Tuple[str, str]]:
    """(prompt, answer) per example, in file order; UserError naming the file and line of the first problem. Read and
    checked line by line as a prompt file is (workloads/prompt_file.py)."""
    text = decode(read_bytes(path, where, "task"), where)
    examples = [_example(line, f"{where} line {number}") for number, line in numbered_lines(text)]
    if not examples:
        raise UserError(f'{where}: no examples in the file (one JSON object per line: '
                        '{"prompt": ..., "answer": ...})')
    return examples


def _example(line: str, at: str) -> Tuple[str, str]:
    obj = json_object(line, at, KEYS, '"prompt" and "answer"')
    for key in KEYS:
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            got = "nothing" if key not in obj else f"{type(value).__name__} {value!r}"[:80]
            raise UserError(f'{at}: "{key}" must be non-empty text, got {got}')
    return obj["prompt"], obj["answer"]


def _prompt_ids(prompt: str, template: str, tokenizer) -> Tuple[int, ...]:
    """As a prompt file's first turn is encoded (workloads/prompts.py): only raw text gets the tokenizer's specials."""
    text = render(template, (("user", prompt),), None, tokenizer)
    return tuple(tokenizer(text, add_special_tokens=template == "none")["input_ids"])


def _stop_ids(tokenizer, model: ModelSpec) -> Tuple[int, ...]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(model.config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured] if configured is not None else [])
    return tuple(sorted(ids))

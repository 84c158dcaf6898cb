"""scripts/train_digits_model.py: the task, its held-out split, the character tokenizer, reproducible training, and
a folder the harness takes as a model (issue 51). Training is a few steps of a tiny shape here; the full models'
accuracy is the script's own figure (`make digits-model`)."""

import json
import random
import sys
from dataclasses import replace
from itertools import islice
from pathlib import Path

import pytest

from tests.contract import refused_argument

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import train_digits_model as digits  # noqa: E402

TINY = digits.ModelShape(hidden_size=32, num_layers=1, num_heads=2, steps=3, seed=0)


def test_every_example_is_its_instruction_applied():
    rng = random.Random(7)
    for _ in range(200):
        prompt, answer = digits.example(rng)
        operation, number = prompt.split(" ")
        assert digits.MIN_DIGITS <= len(number) <= digits.MAX_DIGITS and number.isdigit()
        assert answer == (number[::-1] if operation == "reverse" else "".join(sorted(number)))


def test_the_test_split_is_fixed_distinct_and_never_trained_on():
    examples = digits.test_split()
    prompts = [p for p, _ in examples]
    assert len(set(prompts)) == len(prompts) == digits.TEST_SIZE and examples == digits.test_split()
    assert {p.split(" ")[0] for p in prompts} == set(digits.OPERATIONS)
    held_out = set(prompts)
    # Short prompts repeat often enough that an unfiltered stream would hold some within this many examples.
    drawn = list(islice(digits.training_examples(0, held_out), 20_000))
    assert not held_out & {p for p, _ in drawn}
    assert held_out & {p for p, _ in islice(digits.training_examples(0, set()), 20_000)}


def test_the_tokenizer_is_one_token_per_character_with_bos_and_the_chat_template():
    tok = digits.build_tokenizer()
    ids = tok("reverse 40721=")["input_ids"]
    assert ids == digits.encode("reverse 40721", "")[0][:-1]  # what training and scoring feed the model
    assert len(ids) == 1 + len("reverse 40721=") and ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == "reverse 40721="
    text = tok.apply_chat_template([{"role": "user", "content": "sort 40721"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == "<s>sort 40721="


def test_training_is_reproducible_and_the_seed_matters():
    held_out = {p for p, _ in digits.test_split()}
    first, again = (digits.train(TINY, held_out, log=lambda line: None).state_dict() for _ in range(2))
    other = digits.train(replace(TINY, seed=1), held_out, log=lambda line: None).state_dict()
    assert all(first[k].equal(again[k]) for k in first)
    assert not all(first[k].equal(other[k]) for k in first)


def test_the_saved_folder_is_a_model_the_harness_takes(tmp_path):
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from workloads.prompt_file import read_prompt_file

    examples = digits.test_split()
    model = digits.train(TINY, {p for p, _ in examples}, log=lambda line: None)
    digits.save(model, tmp_path, examples)
    spec = resolve_model(ModelConfig(name_or_path=str(tmp_path), weights="pretrained", dtype="fp32"))
    assert spec.num_params == sum(p.numel() for p in model.parameters())
    lines = [json.loads(line) for line in (tmp_path / "task" / "test.jsonl").read_text().splitlines()]
    assert [(x["prompt"], x["answer"]) for x in lines] == examples
    prompts = [json.loads(line) for line in (tmp_path / "task" / "prompts.jsonl").read_text().splitlines()]
    assert prompts == [{"prompt": p, "max_tokens": len(a)} for p, a in examples]
    read = read_prompt_file(tmp_path / "task" / "prompts.jsonl").records  # what a sweep's workload reads
    assert [record.max_tokens for record in read] == [len(a) for _, a in examples]
    share, (low, high) = digits.accuracy(model, examples[:20])  # three steps of training: no skill yet
    assert share == 0.0 and low == 0.0 and 0 < high < 0.2


@pytest.mark.parametrize("right, n", [(0, 50), (50, 50), (37, 50), (499, 500)])
def test_the_wilson_interval_holds_the_share_within_0_and_1(right, n):
    from harness.measure.stats import wilson

    low, high = wilson(right, n)
    assert 0.0 <= low <= right / n <= high <= 1.0 and high - low < 0.3
    assert (low == 0.0) == (right == 0) and (high == 1.0) == (right == n)


def test_evaluating_a_folder_without_a_model_is_one_line_and_exit_2(tmp_path, capsys):
    err = refused_argument(digits.main, ["--out", str(tmp_path), "--evaluate-only"], capsys)
    assert f"--evaluate-only: {tmp_path} has no model.safetensors" in err


def test_training_leaves_the_callers_torch_settings_as_they_were():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # not the training's own count, so that a count left behind shows
    try:
        digits.train(replace(TINY, steps=1), set(), log=lambda line: None)
        assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (1, False)
    finally:
        torch.set_num_threads(threads)

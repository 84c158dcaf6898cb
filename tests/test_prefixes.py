"""Shared prefixes without an engine: what is put in front of each prompt, from the workload's source or a text file,
and the config checks (exit code 2)."""

import os
from pathlib import Path

import pytest

from app.cli import main
from harness.config.sweep import SweepConfig
from harness.model.tokenizer import load_tokenizer
from harness.plan.points import SweepPoint
from workloads.base import PrefixOptions
from workloads.random_ids import RandomOptions
from workloads.registry import build_workload

TEXT = ("You are a careful assistant for infrastructure engineers. Answer briefly, name the command to run, and say "
        "what could go wrong before suggesting anything that deletes data.\n")


def batch_of(model, prefix: PrefixOptions, batch_size=4, index=0):
    config = SweepConfig(benchmark_name="t", batch_sizes=[batch_size], input_lengths=[16], output_lengths=[4],
                         workload=RandomOptions(prefix=prefix))
    workload = build_workload(config, model)
    return workload, workload.batch(SweepPoint(16, 4, batch_size, workload.name), "timed", index)


def test_random_prefixes_take_turns_in_front_of_every_prompt(model):
    workload, batch = batch_of(model, PrefixOptions(num_prefixes=2, prefix_tokens=24))
    heads = [p[:24] for p in batch.prompts]
    assert heads[0] == heads[2] != heads[1] == heads[3]
    assert batch.input_tokens == (40,) * 4 and workload.name == "random, prefix 2x24"
    _, later = batch_of(model, PrefixOptions(num_prefixes=2, prefix_tokens=24), index=1)
    assert [p[:24] for p in later.prompts] == heads  # the same prefixes in every batch
    assert [p[24:] for p in later.prompts] != [p[24:] for p in batch.prompts]


def test_prefixes_cut_from_a_text_file(model, tmp_path):
    path = tmp_path / "system.txt"
    path.write_text(TEXT)
    ids = load_tokenizer(model)(TEXT, add_special_tokens=False)["input_ids"]
    _, batch = batch_of(model, PrefixOptions(num_prefixes=2, prefix_tokens=10, text=str(path)))
    assert batch.prompts[0][:10] == ids[:10] and batch.prompts[1][:10] == ids[10:20]


def sweep(tmp_path, prefix: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, weights: random, dtype: fp32}\n"
                    "backends: [{name: hf, device: cpu}]\nbatch_sizes: [1]\ninput_lengths: [8]\noutput_lengths: [4]\n"
                    f"workload: {{prompts: random, prefix: {{{prefix}}}}}\n")
    return path


@pytest.mark.parametrize("prefix, message", [
    ("text: system.txt", "workload.prefix.text: the prefixes are cut from it to prefix_tokens each; set prefix_tokens"),
    ("text: nowhere.txt, prefix_tokens: 8", "workload.prefix.text: nowhere.txt: no such file"),
    ("text: system.txt, prefix_tokens: 500", "workload.prefix.text: SYSTEM has NNN tokens, fewer than prefix_tokens "
     "(500)"),
    ("prefix_tokens: -1", "workload.prefix.prefix_tokens: must be an integer of 0 or more, got -1"),
])
def test_bad_prefix_exits_2_with_one_line(tmp_path, capsys, model, prefix, message):
    (tmp_path / "system.txt").write_text(TEXT)
    assert main([str(sweep(tmp_path, prefix)), "--dry-run"]) == 2
    count = len(load_tokenizer(model)(TEXT, add_special_tokens=False)["input_ids"])
    system = os.path.relpath(tmp_path / "system.txt")  # found beside the YAML, named from the working directory
    assert capsys.readouterr().err == f"error: {message.replace('SYSTEM', system).replace('NNN', str(count))}\n"

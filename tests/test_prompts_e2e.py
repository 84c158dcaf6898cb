"""hf and vllm on the example prompt file through benchmark.py: real prompt lengths and per-prompt output caps
counted as the batches really held them (checked against the tokenizer's own chat template), sampled."""

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from harness.model.spec import PRESETS_DIR
from tests.contract import processes_with, rows, run_marked

EXAMPLE = Path(__file__).resolve().parent.parent / "yamls" / "prompts" / "example-chats.jsonl"
SWEEP = f"""
benchmark_name: prompts-e2e
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
workload: {{prompts: {EXAMPLE}, template: chat, num_prompts: 24}}
sampling: {{temperature: 0.7, top_p: 0.95}}
backends:
  - {{name: hf, device: cpu}}
  - {{name: vllm, enforce_eager: true, kv_cache_memory_bytes: 268435456, multiprocessing: false}}  # starts 19 s sooner
batch_sizes: [1, 4]
output_lengths: [70]
num_batches: 2
num_warmup_batches: 1
"""
BATCH_SIZES, OUTPUT, TIMED, WARMUP = (1, 4), 70, 2, 1


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prompts")
    (tmp / "sweep.yaml").write_text(SWEEP)
    proc, marker = run_marked(tmp / "sweep.yaml", "--output-dir", tmp / "out")
    return proc, tmp / "out", marker


def timed_prompts(batch_size: int):
    """The file's lines the timed batches held: shuffled with seed 0, the first 24 kept, warm-up batch first."""
    lines = [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]
    used = [lines[i] for i in np.random.default_rng(0).permutation(len(lines))[:24]]
    slots = range(WARMUP, WARMUP + TIMED)
    return [used[(slot * batch_size + j) % len(used)] for slot in slots for j in range(batch_size)]


def chat_tokens(line, tokenizer) -> int:
    messages = line.get("messages") or [{"role": "user", "content": line["prompt"]}]
    # transformers 5 returns a BatchEncoding here: count its input_ids
    return len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)["input_ids"])


@pytest.mark.engine
def test_both_engines_ran_every_point(sweep):
    proc, out, marker = sweep
    assert proc.returncode == 0, proc.stderr
    got = rows(out / "results.csv")
    assert sorted((r["backend"], r["batch_size"]) for r in got) == [("hf", "1"), ("hf", "4"), ("vllm", "1"),
                                                                    ("vllm", "4")]
    assert all(r["status"] == "ok" and r["workload"] == "example-chats.jsonl (chat)" for r in got), got
    assert not processes_with(marker)


@pytest.mark.engine
def test_input_tokens_are_the_templated_prompts_the_batches_held(sweep):
    _, out, _ = sweep
    tokenizer = AutoTokenizer.from_pretrained(PRESETS_DIR / "tiny-llama")
    for r in rows(out / "results.csv"):
        lengths = [chat_tokens(line, tokenizer) for line in timed_prompts(int(r["batch_size"]))]
        assert float(r["input_tokens_mean"]) == pytest.approx(np.mean(lengths), rel=1e-5), r["backend"]
        assert int(r["input_tokens_max"]) == max(lengths)


@pytest.mark.engine
def test_each_prompt_gets_its_own_output_cap_on_both_engines(sweep):
    _, out, _ = sweep
    for r in rows(out / "results.csv"):
        budgets = [min(OUTPUT, line.get("max_tokens") or OUTPUT) for line in timed_prompts(int(r["batch_size"]))]
        assert float(r["output_tokens_mean"]) == pytest.approx(np.mean(budgets), rel=1e-5), r["backend"]
        assert float(r["request_tpot_ms_mean"]) > 0 and float(r["request_latency_ms_p50"]) > 0
        # throughput counts the tokens produced, not batch_size * output_length
        total_latency_s = float(r["latency_ms_mean"]) * TIMED / 1e3
        assert float(r["throughput_tokens_per_s"]) == pytest.approx(sum(budgets) / total_latency_s, rel=0.01)


@pytest.mark.engine
def test_sampling_turns_the_token_crosscheck_off_and_says_why(sweep):
    _, out, _ = sweep
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["token_crosscheck"].startswith("off: sampling.temperature > 0")
    assert all(r["tokens_identical_share"] == "" for r in rows(out / "results.csv"))
    assert manifest["workload"]["prompts_used"] == 24 and manifest["workload"]["template"] == "chat"

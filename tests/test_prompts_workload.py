"""The prompt-file workload without an engine: what each batch holds, and bad input through benchmark.py's CLI
(exit code 2, one line naming the file, the line and the key)."""

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.model.spec import PRESETS_DIR, resolve_model
from harness.plan.points import SweepPoint
from workloads.registry import WORKLOADS, build_workload

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "yamls" / "prompts" / "example-chats.jsonl"


def sweep_yaml(tmp_path, workload: str, extra: str = "") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "benchmark_name: p\nmodel: {preset: tiny-llama, weights: random, dtype: fp32}\n"
        f"workload: {workload}\nbackends: [{{name: hf, device: cpu}}]\nbatch_sizes: [1, 4]\n"
        f"output_lengths: [70]\nnum_batches: 2\nnum_warmup_batches: 1\n{extra}"
    )
    return path


def build(path: Path, *overrides: str):
    config = load_config(path, list(overrides), BACKENDS, WORKLOADS)
    return config, build_workload(config, resolve_model(config.model))


def test_batches_cycle_through_the_shuffled_file_and_respect_each_prompt_cap(tmp_path):
    config, workload = build(sweep_yaml(tmp_path, f"{{prompts: {EXAMPLE}, template: chatml}}"))
    tokenizer = AutoTokenizer.from_pretrained(PRESETS_DIR / "tiny-llama")
    lines = [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]
    order = __import__("numpy").random.default_rng(config.seed).permutation(len(lines))
    point = SweepPoint(workload.input_lengths()[0], 70, 4, workload.name)
    timed = workload.batch(point, "timed", 1)  # slot 2: one warm-up batch, then timed 0 and 1
    expected = [lines[order[(2 * 4 + j) % len(lines)]] for j in range(4)]
    for ids, line, budget in zip(timed.prompts, expected, timed.max_tokens):
        messages = line.get("messages") or [{"role": "user", "content": line["prompt"]}]
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        text += "<|im_start|>assistant\n"
        assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        assert budget == min(70, line.get("max_tokens") or 70)
    assert timed == workload.batch(point, "timed", 1)  # a pure function: every backend and rank agree
    assert workload.name == "example-chats.jsonl (chatml)" and timed.forced and timed.sampling.greedy


def test_a_stream_sends_the_file_in_order_with_mixed_lengths(tmp_path):
    stream_keys = "scenario: stream\nstream: {request_rates: [2], num_requests: 150, num_warmup_requests: 3}\n"
    path = sweep_yaml(tmp_path, f"{{prompts: {EXAMPLE}, template: chatml}}", stream_keys)
    path.write_text(path.read_text().replace("batch_sizes: [1, 4]\n", ""))
    config, workload = build(path)
    point = SweepPoint(workload.input_lengths()[0], 70, None, workload.name, 2.0)
    timed = workload.stream(point, "timed", config.stream)
    pool = workload.pool
    # the shuffled pool in order from its start, cycling past its end (150 requests, 120 prompts)
    assert [tuple(p) for p in timed.requests.prompts] == [pool[i % len(pool)].token_ids for i in range(150)]
    assert len(set(timed.requests.input_tokens)) > 10  # mixed lengths, as the file has them
    assert timed.requests.max_tokens == tuple(min(70, pool[i % len(pool)].max_tokens or 70) for i in range(150))
    warmup = workload.stream(point, "warmup", config.stream)
    assert [tuple(p) for p in warmup.requests.prompts] == [pool[-1].token_ids, pool[-2].token_ids, pool[-3].token_ids]
    assert timed.arrivals_s == workload.stream(point, "timed", config.stream).arrivals_s


def test_num_prompts_max_prompt_tokens_and_manifest_facts(tmp_path):
    _, workload = build(sweep_yaml(tmp_path, f"{{prompts: {EXAMPLE}, max_prompt_tokens: 100, num_prompts: 30}}"))
    facts = workload.manifest()
    assert facts["prompts_used"] == 30 and facts["prompts_in_file"] == 120
    assert facts["dropped_over_max_prompt_tokens"] > 0
    assert facts["first_prompt_text"].startswith("<|im_start|>") and len(facts["sha256"]) == 64
    assert workload.longest_input(SweepPoint(1, 1, 1)) <= 100


def test_sampling_gives_each_sequence_a_seed(tmp_path):
    config, workload = build(sweep_yaml(tmp_path, f"{{prompts: {EXAMPLE}}}"), "sampling.temperature=0.7")
    batch = workload.batch(SweepPoint(65, 70, 4, workload.name), "timed", 0)
    assert len(set(batch.seeds)) == 4 and batch.sampling.temperature == 0.7
    assert batch.seeds == workload.batch(SweepPoint(65, 70, 4, workload.name), "timed", 0).seeds


def test_a_null_seed_samples_unseeded_as_vllms_benchmark_does(tmp_path):
    config, workload = build(sweep_yaml(tmp_path, f"{{prompts: {EXAMPLE}}}"), "sampling.temperature=0.7",
                             "sampling.seed=null")
    point = SweepPoint(65, 70, 4, workload.name)
    assert workload.batch(point, "timed", 0).seeds == ()
    assert workload.stream_seeds(point, "timed", 4) == ()


def test_a_path_beside_the_yaml_is_found_from_anywhere(tmp_path):
    (tmp_path / "mine.txt").write_text("What is a KV cache?\nExplain paged attention.\n")
    config, workload = build(sweep_yaml(tmp_path, "{prompts: mine.txt, template: none}"))
    assert Path(config.workload.prompts).resolve() == (tmp_path / "mine.txt").resolve()
    assert workload.manifest()["prompts_used"] == 2


def no_chat_template_tokenizer(tmp_path) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(PRESETS_DIR / "tiny-llama")
    tokenizer.chat_template = None
    tokenizer.save_pretrained(tmp_path / "plain-tok")
    (tmp_path / "plain-tok" / "chat_template.jinja").unlink(missing_ok=True)
    return tmp_path / "plain-tok"


def bad_cases(tmp_path):
    """Per case: (workload section, extra YAML, dotlist overrides, expected error); files go into tmp_path."""
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"prompt": "x",}\n')
    (tmp_path / "role.jsonl").write_text('{"messages": [{"role": "bot", "content": "hi"}]}\n')
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "neither.jsonl").write_text('{"text": "hi"}\n')
    ex, tiny = str(EXAMPLE), PRESETS_DIR / "tiny-llama"
    return {
        "missing file": (f"{{prompts: {tmp_path}/nope.jsonl}}", "", [],
                         f"workload.prompts: {tmp_path}/nope.jsonl: no such file"),
        "empty file": (f"{{prompts: {tmp_path}/empty.jsonl}}", "", [],
                       f"workload.prompts: {tmp_path}/empty.jsonl: no prompts in the file"),
        "not json": (f"{{prompts: {tmp_path}/bad.jsonl}}", "", [],
                     f"workload.prompts: {tmp_path}/bad.jsonl line 2: not valid JSON (Expecting property name "
                     "enclosed in double quotes)"),
        "neither key": (f"{{prompts: {tmp_path}/neither.jsonl}}", "", [],
                        f"workload.prompts: {tmp_path}/neither.jsonl line 1: unknown key 'text' (known: prompt, "
                        "messages, max_tokens)"),
        "unknown role": (f"{{prompts: {tmp_path}/role.jsonl}}", "", [],
                         f"workload.prompts: {tmp_path}/role.jsonl line 1: messages[0] has unknown role 'bot' "
                         "(allowed: system, user, assistant)"),
        "unknown template": (f"{{prompts: {ex}, template: llama2}}", "", [],
                             "workload.template: unknown template 'llama2' (known: chat, none, llama-2, llama-3, "
                             "mistral, chatml); did you mean 'llama-2'?"),
        "no chat template": (f"{{prompts: {ex}, template: chat}}", "",
                             [f"model.tokenizer={no_chat_template_tokenizer(tmp_path)}"],
                             f"workload.template: 'chat' needs a tokenizer with a chat template; {tmp_path}/plain-tok "
                             "has none (use one of llama-2, llama-3, mistral, chatml, none)"),
        "file and input_lengths": (f"{{prompts: {ex}}}", "input_lengths: [128]\n", [],
                                   f"input_lengths: a prompt file sets the prompt lengths (workload.prompts: {ex}); "
                                   "remove input_lengths"),
        "all dropped": (f"{{prompts: {ex}, max_prompt_tokens: 5}}", "", [],
                        f"workload.max_prompt_tokens: every prompt of {ex} is longer than 5 tokens after templating "
                        "(shortest: 15)"),
        "negative temperature": (f"{{prompts: {ex}}}", "sampling: {temperature: -0.5}\n", [],
                                 "sampling.temperature: must be a finite number >= 0, got -0.5"),
        "top_p zero": (f"{{prompts: {ex}}}", "sampling: {top_p: 0}\n", [],
                       "sampling.top_p: must be a finite number in (0, 1], got 0"),
        "vocab too large": (f"{{prompts: {ex}}}", "", ["model.overrides={vocab_size: 1000}"],
                            f"model.tokenizer: {tiny} has 3747 tokens, more than tiny-llama (modified: vocab 1000)'s "
                            "vocab_size (1000); its ids would index past the embedding table"),
        "template with random prompts": ("{prompts: random, template: chat}", "input_lengths: [16]\n", [],
                                         "workload.template: unknown key (allowed: prompts, stop_at_eos, prefix)"),
        "random without input_lengths": ("{prompts: random}", "", [],
                                          "input_lengths: required with random prompts (workload.prompts: random)"),
    }


CASE_NAMES = ["missing file", "empty file", "not json", "neither key", "unknown role", "unknown template",
              "no chat template", "file and input_lengths", "all dropped", "negative temperature", "top_p zero",
              "vocab too large", "template with random prompts", "random without input_lengths"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, name):
    workload, extra, overrides, message = bad_cases(tmp_path)[name]
    assert main([str(sweep_yaml(tmp_path, workload, extra)), *overrides, "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"

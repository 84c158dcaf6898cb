"""The tokenizer shipped with the `tiny-llama` preset: loads offline, fits the model, and is
exactly what scripts/train_tokenizer.py produces from the repository's text."""
import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRESET = REPO / "harness" / "presets" / "tiny-llama"
CHATML_MARKERS = ["<|im_start|>", "<|im_end|>"]


def _load_script():
    # scripts/ is not a package: load the file itself so the test trains with the shipped code.
    spec = importlib.util.spec_from_file_location("train_tokenizer", REPO / "scripts" / "train_tokenizer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(PRESET), local_files_only=True)


def test_loads_offline_and_fits_the_model(tok):
    script = _load_script()
    model_vocab = json.loads((PRESET / "config.json").read_text())["vocab_size"]
    assert len(tok) <= script.VOCAB_SIZE <= model_vocab
    assert (tok.bos_token, tok.bos_token_id) == ("<s>", 1)
    assert (tok.eos_token, tok.eos_token_id) == ("</s>", 2)
    assert tok.unk_token_id == 0
    assert tok.pad_token_id is not None
    for i, special in enumerate(script.SPECIAL_TOKENS):
        assert tok.convert_tokens_to_ids(special) == i


def test_round_trip_and_bos(tok):
    text = "Sweep batch size, input length and output length: TTFT 12.5 ms, naïve café ✓."
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert tok(text, add_special_tokens=False)["input_ids"] == ids[1:]
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert max(ids) < tok.vocab_size


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is TTFT?"},
    {"role": "assistant", "content": "Time to first token."},
    {"role": "user", "content": "And TPOT?"},
]


def test_chat_template_is_chatml(tok):
    expected = ("<|im_start|>system\nYou are terse.<|im_end|>\n"
                "<|im_start|>user\nWhat is TTFT?<|im_end|>\n"
                "<|im_start|>assistant\nTime to first token.<|im_end|>\n"
                "<|im_start|>user\nAnd TPOT?<|im_end|>\n"
                "<|im_start|>assistant\n")
    assert tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True) == expected
    without = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=False)
    assert without == expected[:-len("<|im_start|>assistant\n")]


def test_chat_template_tokenizes_markers_as_single_ids(tok):
    encoded = tok.apply_chat_template(MESSAGES, tokenize=True, add_generation_prompt=True)
    ids = encoded["input_ids"]  # transformers 5 returns a BatchEncoding, not a bare list
    assert ids and all(isinstance(i, int) for i in ids)
    start, end = tok.convert_tokens_to_ids(CHATML_MARKERS)
    assert ids.count(start) == len(MESSAGES) + 1 and ids.count(end) == len(MESSAGES)
    assert ids[0] == start  # ChatML carries no BOS
    for marker in ["<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>", "[INST]", "<<SYS>>"]:
        assert len(tok(marker, add_special_tokens=False)["input_ids"]) == 1, marker


def test_training_reproduces_the_shipped_tokenizer(tmp_path):
    script = _load_script()
    script.train(tmp_path)
    shipped = (PRESET / "tokenizer.json").read_bytes()
    assert (tmp_path / "tokenizer.json").read_bytes() == shipped, (
        "the shipped tokenizer is not what the example chats train now (yamls/prompts/ "
        "changed?): rerun `python scripts/train_tokenizer.py` and commit the result")


def test_preset_still_loads():
    from transformers import AutoConfig

    from harness.model.spec import preset_names

    config = AutoConfig.from_pretrained(str(PRESET), local_files_only=True)
    assert (config.vocab_size, config.bos_token_id, config.eos_token_id) == (32000, 1, 2)
    assert "tiny-llama" in preset_names()

"""How many tokens each SSE chunk carries, and where a response's output count comes from, for the chunk shapes
real servers send (taken from vLLM 0.32 and transformers serve 5.19 responses on this machine). The servers
themselves are exercised end to end in tests/test_openai_server.py and tests/test_transformers_serve.py."""

import pytest
from transformers import AutoTokenizer

from backends.openai_compat.chunks import ResponseReading
from harness.model.spec import PRESETS_DIR


def chat_chunk(content=None, role=None, finish=None, usage=None):
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return {**chunk, "usage": usage} if usage else chunk


def text_chunk(text, finish=None, usage=None):
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return {**chunk, "usage": usage} if usage else chunk


def usage(completion, prompt=5):
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def read_all(reading, chunks):
    return [reading.read(c) for c in chunks]


def test_vllm_chat_with_running_usage():
    """The role chunk carries none; a chunk that coalesces two steps carries two; the usage-only end carries none."""
    chunks = [chat_chunk("", role="assistant", usage=usage(0, 18)), chat_chunk("a", usage=usage(1, 18)),
              chat_chunk("bc", usage=usage(3, 18)), chat_chunk("", finish="length", usage=usage(4, 18)),
              {"choices": [], "usage": usage(4, 18)}]
    reading = ResponseReading(chat=True)
    assert read_all(reading, chunks) == [0, 1, 2, 1, 0]
    assert reading.output_tokens() == (4, "usage") and reading.usage_input_tokens == 18


def test_transformers_chat_usage_only_on_the_closing_chunk():
    """Text where tokens decode to some (5 chunks for 8 tokens); the closing chunk's usage is not 3 late tokens."""
    chunks = ([chat_chunk(role="assistant")] + [chat_chunk(t) for t in ("S", " NUMA", "Pri", "\ufffd NUMA", "x")]
              + [chat_chunk(finish="length", usage=usage(8, 18))])
    reading = ResponseReading(chat=True)
    assert read_all(reading, chunks) == [0, 1, 1, 1, 1, 1, 0]
    assert reading.output_tokens() == (8, "usage") and reading.counted == 5


def test_completions_without_usage_count_one_per_chunk_even_without_text():
    """vLLM without continuous_usage_stats: a token whose text is empty is still a chunk, and a token."""
    chunks = [text_chunk("a"), text_chunk(""), text_chunk("b"), text_chunk("c", finish="length")]
    reading = ResponseReading(chat=False)
    assert read_all(reading, chunks) == [1, 1, 1, 1]
    assert reading.output_tokens() == (4, "chunks")


def test_without_usage_the_text_is_retokenized():
    tokenizer = AutoTokenizer.from_pretrained(PRESETS_DIR / "tiny-llama")
    text = "The quick brown fox jumps over the lazy dog"
    reading = ResponseReading(chat=True)
    first, *rest = text.split(" ")
    read_all(reading, [chat_chunk(role="assistant"), chat_chunk(first)] + [chat_chunk(" " + w) for w in rest])
    expected = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert expected != len(rest) + 1  # the count is the tokenizer's, not the chunks'
    assert reading.output_tokens(tokenizer) == (expected, "tokenizer")


def test_token_ids_count_exactly():
    reading = ResponseReading(chat=False)
    assert read_all(reading, [{"choices": [{"text": "ab", "token_ids": [7, 8], "finish_reason": None}]}]) == [2]
    assert reading.token_ids == [7, 8]


def test_an_error_chunk_ends_the_request_with_its_message():
    with pytest.raises(RuntimeError, match="server error mid-stream: CB worker died"):
        ResponseReading(chat=True).read({"error": "CB worker died"})


def test_a_one_token_answer_whose_text_is_empty_is_counted():
    """vLLM with continuous usage, max_tokens 1: one chunk with the token, its finish_reason and usage; a random
    model's token may decode to no text (part of a character)."""
    reading = ResponseReading(chat=False)
    closing = {"choices": [{"text": "", "finish_reason": "length"}], "usage": usage(1, 33)}
    assert read_all(reading, [closing, {"choices": [], "usage": usage(1, 33)}]) == [1, 0]
    assert reading.output_tokens() == (1, "usage")


def test_reasoning_chunks_are_output_counted_apart_from_the_answer():
    """vLLM with a reasoning parser: `reasoning_content` (later `reasoning`) before `content`; every chunk's tokens
    are output, the reasoning's counted apart, and the first chunk with answer tokens is known as it arrives."""
    def reasoning_chunk(text, completion, key="reasoning_content"):
        return {"choices": [{"index": 0, "delta": {key: text}, "finish_reason": None}], "usage": usage(completion, 9)}

    chunks = [chat_chunk("", role="assistant", usage=usage(0, 9)), reasoning_chunk("Let", 1),
              reasoning_chunk(" me see", 3, key="reasoning"), chat_chunk("Yes", usage=usage(4, 9)),
              chat_chunk(".", finish="stop", usage=usage(5, 9)), {"choices": [], "usage": usage(5, 9)}]
    reading = ResponseReading(chat=True)
    answered = []
    for c in chunks:
        reading.read(c)
        answered.append(reading.answered)
    assert answered == [False, False, False, True, True, False]
    assert reading.output_tokens() == (5, "usage") and reading.texts == ["Yes", "."]
    assert reading.reasoning_tokens == 3 and reading.reasoning_texts == ["Let", " me see"]
    plain = ResponseReading(chat=True)
    read_all(plain, [chat_chunk("a", usage=usage(1)), chat_chunk("b", finish="stop", usage=usage(2))])
    assert plain.reasoning_tokens is None  # nothing streamed as reasoning: not a reasoning answer

"""Embeddings and rerank requests without a server: what each request carries, how an answer is read and refused,
and what a point of answers that come whole reports (docs/measurement.md, "Embeddings and rerank"). Against vLLM's
own pooling server: tests/test_pooling_server.py."""

import json

import pytest

from backends.openai_compat import pooling
from harness.config.sections import ModelConfig
from harness.measure.metrics import summarize_stream
from harness.measure.records import SLO
from harness.model.spec import resolve_model
from harness.model.tokenizer import load_tokenizer
from harness.run.output_checks import judge_stream
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import RequestTiming, StreamSpec, StreamTiming

PROMPTS = [[10, 11, 12, 13], [20, 21, 22, 23, 24, 25], [30, 31], [40, 41, 42]]


def stream(prompts=PROMPTS) -> StreamSpec:
    return StreamSpec(BatchSpec(prompts, (0,) * len(prompts)), tuple(0.1 * i for i in range(len(prompts))))


def body(endpoint, index, inputs, tokenizer=None, extra=None):
    return json.loads(pooling.request_body(endpoint, "m", stream(), index, inputs, tokenizer, extra or {}))


def test_an_embeddings_request_carries_its_prompt_and_the_next_ones_as_token_ids_wrapping_round():
    assert body("embeddings", 0, 1) == {"model": "m", "input": [PROMPTS[0]]}
    assert body("embeddings", 2, 3, extra={"encoding_format": "base64"}) == {
        "model": "m", "input": [PROMPTS[2], PROMPTS[3], PROMPTS[0]], "encoding_format": "base64"}
    assert pooling.harness_input_tokens("embeddings", stream(), 2, 3) == 2 + 3 + 4


def test_a_rerank_request_pairs_the_first_half_of_its_prompt_with_the_second_halves_as_text():
    tokenizer = load_tokenizer(resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32")))
    prompts = [tokenizer("the quick brown fox jumps over", add_special_tokens=False)["input_ids"],
               tokenizer("a lazy dog sleeps in the sun", add_special_tokens=False)["input_ids"]]
    sent = json.loads(pooling.request_body("rerank", "m", stream(prompts), 0, 2, tokenizer, {}))
    first, second = prompts
    assert sent == {"model": "m", "query": tokenizer.decode(first[:len(first) // 2]),
                    "documents": [tokenizer.decode(first[len(first) // 2:]),
                                  tokenizer.decode(second[len(second) // 2:])]}
    # each (query, document) pair, as a cross-encoder scores them
    half = len(first) // 2
    assert pooling.harness_input_tokens("rerank", stream(prompts), 0, 2) == (
        half + len(first) - half) + (half + len(second) - len(second) // 2)


def test_a_rerank_request_without_a_tokenizer_or_with_ids_it_cannot_write_says_why():
    with pytest.raises(RuntimeError, match="rerank sends text and the model has no tokenizer"):
        body("rerank", 0, 1)
    tokenizer = load_tokenizer(resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32")))
    past = len(tokenizer)  # tiny-llama's config has 32,000 ids, its tokenizer 3,747 tokens
    with pytest.raises(RuntimeError, match=f"token id {past} is past the tokenizer's {past} tokens; with random "
                                           f"weights set model.overrides.vocab_size: {past}, or use a prompt file"):
        pooling.request_body("rerank", "m", stream([[5, 6], [7, past]]), 0, 2, tokenizer, {})


EMBEDDED = {"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 1, "embedding": "AAAA"}],
            "usage": {"prompt_tokens": 9, "total_tokens": 9}}
RANKED = {"results": [{"index": 1, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.2}],
          "usage": {"prompt_tokens": 12, "total_tokens": 12}}


def test_a_whole_answer_gives_the_servers_prompt_count():
    assert pooling.read_answer("embeddings", EMBEDDED, 2) == 9
    assert pooling.read_answer("rerank", RANKED, 2) == 12
    assert pooling.read_answer("rerank", {"results": RANKED["results"]}, 2) is None  # no usage: the harness counts


@pytest.mark.parametrize("endpoint,answer,inputs,message", [
    ("embeddings", [1, 2], 1, "the answer is not a JSON object: [1, 2]"),
    ("embeddings", {"object": "error"}, 1, "the answer has no `data` list of embeddings"),
    ("embeddings", EMBEDDED, 3, "the server answered 2 embeddings for 3 inputs"),
    ("rerank", RANKED, 1, "the server answered 2 scores for 1 inputs"),
    ("rerank", {"results": [{"index": 0}]}, 1, "an item of `results` has no `relevance_score`"),
    ("embeddings", {"data": ["x"]}, 1, "an item of `data` has no `embedding`"),
    ("embeddings", {**EMBEDDED, "usage": {"prompt_tokens": "9"}}, 2, "usage.prompt_tokens is not a positive count"),
    ("embeddings", {**EMBEDDED, "usage": {"prompt_tokens": True}}, 2, "usage.prompt_tokens is not a positive count"),
    ("embeddings", {**EMBEDDED, "usage": {"prompt_tokens": 0}}, 2, "usage.prompt_tokens is not a positive count"),
])
def test_an_answer_that_is_not_one_result_per_input_is_the_requests_error(endpoint, answer, inputs, message):
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        pooling.read_answer(endpoint, answer, inputs)


def pooled(index, scheduled_s, answered_s, inputs=4, input_tokens=256, error=""):
    return RequestTiming(index, scheduled_s, scheduled_s, scheduled_s, None if error else answered_s,
                         None if error else answered_s, input_tokens, 0, error=error, output_tokens_source="none",
                         inputs=inputs)


def test_a_point_of_answers_that_come_whole_reports_latency_and_what_it_took_in():
    timing = StreamTiming(0.0, 2.0, (pooled(0, 0.0, 0.05), pooled(1, 0.5, 0.6), pooled(2, 1.0, 1.4),
                                     pooled(3, 1.5, 2.0, error="RuntimeError: HTTP 500")))
    judged = judge_stream(timing, stream(), max_failed_share=0.5)
    assert [r.ok for r in judged.requests] == [True, True, True, False]  # no output tokens: not short of any
    row = summarize_stream(judged, SLO(ttft_ms=200.0, tpot_ms=1.0, percentile=90))
    assert row["duration_s"] == pytest.approx(1.4)
    assert row["input_tokens_per_s"] == pytest.approx(3 * 256 / 1.4)
    assert row["inputs_per_s"] == pytest.approx(3 * 4 / 1.4)
    assert row["inputs_per_request"] == 4
    assert row["e2e_ms_p50"] == pytest.approx(100.0)
    # no first token apart from the whole answer, no output: those columns stay empty
    assert row["ttft_ms_p50"] is None and row["tpot_ms_p50"] is None and row["itl_ms_p50"] is None
    assert row["throughput_tokens_per_s"] is None and row["output_tokens_per_s_per_user"] is None
    # the SLO's ttft_ms bounds the whole latency: 400 ms misses 200 ms
    assert row["slo_attainment"] == pytest.approx(2 / 4)


def test_a_generated_stream_reports_its_input_tokens_per_second_too():
    request = RequestTiming(0, 0.0, 0.0, 0.0, 0.1, 0.5, 100, 5, token_gaps_s=(0.1,) * 4)
    row = summarize_stream(StreamTiming(0.0, 0.5, (request,)), SLO(ttft_ms=1e3, tpot_ms=1e3, percentile=90))
    assert row["input_tokens_per_s"] == pytest.approx(200.0) and row["throughput_tokens_per_s"] == pytest.approx(10.0)
    assert "inputs_per_s" not in row and row["ttft_ms_p50"] == pytest.approx(100.0)

"""Reasoning streamed apart from the answer (docs/measurement.md, "Reasoning tokens"), end to end against
scripts/loopback_server.py answering chat requests as vLLM does with a reasoning parser: its first N tokens as
`reasoning_content`, the rest as `content`, OpenAI's reasoning count in its usage. The requests go through the
`openai` backend, and their timings through the same summary and requests.csv rows a sweep writes. Each API's own
event shapes: tests/test_openai_chunks.py, tests/test_openai_events.py."""

import numpy as np
import pytest

from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
from harness.config.sections import ModelConfig
from harness.measure.metrics import summarize_stream
from harness.measure.records import SLO, PointResult
from harness.measure.writers import request_rows
from harness.model.spec import resolve_model
from harness.plan.points import SweepPoint, SweepShape
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from tests.conftest import REPO
from tests.test_columns import CONTEXT

LOOPBACK = f"{{python}} {REPO / 'scripts' / 'loopback_server.py'} --port {{port}} --token-gap-ms 5"
REASONING, OUTPUT = 3, 8
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def timing():
    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    options = OpenAIOptions(name="openai", command=f"{LOOPBACK} --reasoning-tokens {REASONING}", endpoint="chat")
    options.validate("backends[0]")
    backend = OpenAIBackend(options, model, SweepShape(0, 64, OUTPUT, scenario="stream"))
    backend.load()
    try:
        n = 6
        conversations = tuple((("user", f"Question {i}: why?"),) for i in range(n))
        prompts = np.random.default_rng(0).integers(3, 3000, size=(n, 8)).tolist()
        stream = StreamSpec(BatchSpec(prompts, (OUTPUT,) * n, messages=conversations),
                            arrival_times("constant", 20.0, n, 0))
        return backend.serve(stream)
    finally:
        backend.close()


def test_reasoning_is_output_counted_apart_with_the_answers_first_token(timing):
    for r in timing.requests:
        assert r.ok, r.error
        assert (r.output_tokens, r.reasoning_tokens, r.output_tokens_source) == (OUTPUT, REASONING, "usage")
        # the answer starts with the 4th token: three token gaps (5 ms each) after the first
        assert r.first_token_s < r.first_answer_token_s <= r.last_token_s
        assert r.first_answer_token_s - r.first_token_s >= REASONING * 0.005 * 0.9


def test_the_point_and_its_requests_carry_the_reasoning_figures(timing):
    point = summarize_stream(timing, SLO(1000.0, 100.0, 90.0))
    assert point["reasoning_tokens_mean"] == REASONING
    assert point["ttft_answer_ms_p50"] > point["ttft_ms_p50"]
    rows = request_rows(PointResult(CONTEXT, SweepPoint(None, 64, OUTPUT, "random", 20.0, None), "ok",
                                    stream=timing, slo=SLO(1000.0, 100.0, 90.0)))
    assert [row["reasoning_tokens"] for row in rows] == [REASONING] * len(timing.requests)
    assert all(row["ttft_answer_ms"] > row["ttft_ms"] for row in rows)


def think_tokenizer(folder):
    """tiny-llama's tokenizer with DeepSeek-R1's think tokens added, and a chat template that opens the assistant's
    thinking as R1's does ("<think>\\n" after the generation prompt): what vLLM's deepseek_r1 parser and its
    thinking budget read."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(REPO / "harness" / "presets" / "tiny-llama")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    tokenizer.save_pretrained(folder)
    template = (REPO / "harness" / "presets" / "tiny-llama" / "chat_template.jinja").read_text()
    (folder / "chat_template.jinja").write_text(template.replace("'<|im_start|>assistant\\n'",
                                                                 "'<|im_start|>assistant\\n<think>\\n'"))
    return len(tokenizer)


def test_a_vllm_reasoning_parser_is_read_apart_from_the_answer(tmp_path):
    """vLLM itself, with its deepseek_r1 reasoning parser (tiny-llama's tokenizer given R1's think tokens) and a
    thinking budget: every answer thinks for 4 tokens (the budget of 5 counts the template's newline after
    `<think>`), then vLLM forces `</think>` and the answer follows, to the forced length (16 tokens). The reasoning arrives as
    `delta.reasoning` (vLLM 0.32's field; its usage has no reasoning count): counted apart, the answer's first
    token after it."""
    vocab = think_tokenizer(tmp_path)
    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32",
                                      overrides={"vocab_size": vocab}))
    command = (
        "env VLLM_ENABLE_V1_MULTIPROCESSING=0 {python} -m vllm.entrypoints.openai.api_server --model {model_dir} "
        "--load-format dummy --dtype float32 --enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 "
        f"--port {{port}} --max-model-len 512 --disable-uvicorn-access-log --tokenizer {tmp_path} "
        f"--chat-template {tmp_path / 'chat_template.jinja'} --reasoning-parser deepseek_r1 "
        "--reasoning-config '{\"reasoning_start_str\": \"<think>\", \"reasoning_end_str\": \"</think>\"}'")
    options = OpenAIOptions(name="openai", command=command, endpoint="chat",
                            extra_body={"thinking_token_budget": 5})
    options.validate("backends[0]")
    backend = OpenAIBackend(options, model, SweepShape(0, 64, 16, scenario="stream"))
    backend.load()
    try:
        n = 4
        conversations = tuple((("user", f"Question {i}: why is the sky blue?"),) for i in range(n))
        stream = StreamSpec(BatchSpec([[1] * 8] * n, (16,) * n, messages=conversations),
                            arrival_times("constant", 10.0, n, 0))
        timing = backend.serve(stream)
    finally:
        backend.close()
    for r in timing.requests:
        assert r.ok, r.error
        assert (r.output_tokens, r.output_tokens_source) == (16, "usage")
        # `</think>` itself has no text: it is counted with the chunk it comes in, the last reasoning chunk's or the
        # answer's first, as vLLM's steps happen to coalesce
        assert r.reasoning_tokens in (4, 5)
        assert r.first_token_s < r.first_answer_token_s <= r.last_token_s

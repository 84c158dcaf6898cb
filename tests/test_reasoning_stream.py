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

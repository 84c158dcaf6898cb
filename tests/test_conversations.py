"""Multi-turn conversations without an engine: the workload's turns, the arrival loop sending each later turn its
gap after the answer before it with the history in front, failures, and the config checks (exit code 2)."""

import asyncio
import json
import time
from pathlib import Path

import pytest

from app.cli import main
from harness.plan.points import SweepPoint
from harness.scenarios.stream import StreamSpec, Submitted, run_stream
from tests.replay import CONVERSATIONS, conversation_stream, conversation_workload

USER_TURNS = [sum(m["role"] == "user" for m in json.loads(line)["messages"])
              for line in CONVERSATIONS.read_text().splitlines()]


def workload(model, **turns):
    return conversation_workload(model, **turns)


def spec_of(model, **turns) -> StreamSpec:
    return conversation_stream(model, **turns)


def test_conversations_become_consecutive_turns(model):
    w, config = workload(model, turn_gap_s=0.25)
    spec = w.stream(SweepPoint(w.input_lengths()[0], 6, None, w.name, 2.0), "timed", config.stream)
    t = spec.turns
    starts = [i for i, k in enumerate(t.turn) if k == 1]
    # num_requests counts conversations: the pool's first five (the file's items, seeded-shuffled), every user turn
    assert [b - a for a, b in zip(starts, starts[1:] + [len(t.turn)])] == [1 + len(p.later_ids) for p in w.pool[:5]]
    assert sum(USER_TURNS) > len(t.turn) > 5
    for i, (c, k, f, gap) in enumerate(zip(t.conversation, t.turn, t.follows, t.gap_s)):
        assert (f is None) == (k == 1) and (gap == 0.0 if k == 1 else gap == 0.25)
        if k > 1:
            assert f == i - 1 and t.conversation[f] == c and t.turn[f] == k - 1
            assert spec.requests.messages[i] == (("user", w.pool[c].later_texts[k - 2]),)
            assert spec.requests.prompts[i] == list(w.pool[c].later_ids[k - 2])
    assert [spec.arrivals_s[i] for i in starts] == [0.0, 0.5, 1.0, 1.5, 2.0]  # conversations at 2/s
    assert spec.requests.max_tokens == (6,) * len(t.turn)


def test_max_turns_and_exponential_gaps(model):
    capped = spec_of(model, max_turns=2)
    assert max(capped.turns.turn) == 2
    spec = spec_of(model, turn_gap="exponential", turn_gap_s=0.4)
    gaps = [g for g, f in zip(spec.turns.gap_s, spec.turns.follows) if f is not None]
    assert len(set(gaps)) == len(gaps) and all(g > 0 for g in gaps)
    assert gaps == list(spec_of(model, turn_gap="exponential", turn_gap_s=0.4).turns.gap_s[i]
                        for i, f in enumerate(spec.turns.follows) if f is not None)  # seeded


def test_warmup_sends_first_turns_only(model):
    w, config = workload(model)
    warm = w.stream(SweepPoint(w.input_lengths()[0], 6, None, w.name, 2.0), "warmup", config.stream)
    assert warm.turns is None and warm.num_requests == 2


def test_longest_input_is_a_last_turn_with_its_history(model):
    w, _ = workload(model)
    point = SweepPoint(w.input_lengths()[0], 6, None, w.name, 2.0)
    longest = max(len(p.token_ids) + sum(len(t) for t in p.later_ids) + 6 * len(p.later_ids) for p in w.pool)
    assert w.longest_input(point) == longest > max(len(p.token_ids) for p in w.pool)


@pytest.mark.engine
def test_drive_sends_each_later_turn_after_its_answer_with_the_history(model):
    spec = spec_of(model, turn_gap_s=0.05)
    sent = {}

    async def engine(index):  # answers 6 ids made from the request's index, 20 ms after it is sent
        sent[index] = (time.perf_counter(), spec.prompt_ids(index))
        await asyncio.sleep(0.02)
        return Submitted(time.perf_counter() - 0.01, time.perf_counter(), 6, token_ids=tuple([index + 3] * 6))

    timing = run_stream(spec, engine)
    t = spec.turns
    for r in timing.requests:
        assert r.ok and (r.conversation, r.turn) == (t.conversation[r.index], t.turn[r.index])
        prompt = sent[r.index][1]
        assert r.input_tokens == len(prompt)
        if r.turn == 1:
            assert prompt == list(spec.requests.prompts[r.index])
            continue
        before = timing.requests[r.index - 1]
        # history, the answer before it, then its own tokens; due 50 ms after that answer's last token
        assert prompt == sent[r.index - 1][1] + [r.index - 1 + 3] * 6 + list(spec.requests.prompts[r.index])
        assert r.input_tokens == before.input_tokens + before.output_tokens + len(spec.requests.prompts[r.index])
        assert r.scheduled_s == pytest.approx(before.last_token_s + 0.05, abs=1e-9)
        assert r.scheduled_s <= r.dispatched_s <= sent[r.index][0]


@pytest.mark.engine
def test_a_failed_turn_ends_its_conversation(model):
    spec = spec_of(model)
    second = next(i for i, k in enumerate(spec.turns.turn) if k == 2)
    conversation = spec.turns.conversation[second]

    async def engine(index):
        if index == second:
            raise RuntimeError("HTTP 500")
        now = time.perf_counter()
        return Submitted(now, now, 6, token_ids=(5,) * 6)

    timing = run_stream(spec, engine)
    mine = [r for r in timing.requests if r.conversation == conversation]
    assert mine[1].error == "RuntimeError: HTTP 500"
    assert all(r.error == "not sent: turn 2 of its conversation failed" for r in mine[2:])
    assert all(r.ok for r in timing.requests if r.conversation != conversation)


@pytest.mark.engine
def test_a_later_turn_without_the_answers_ids_fails_with_why(model):
    spec = spec_of(model)

    async def engine(index):  # a server that streams text only: no ids to continue from
        spec.prompt_ids(index)
        now = time.perf_counter()
        return Submitted(now, now, 6, text="words")

    timing = run_stream(spec, engine)
    later = [r for r in timing.requests if r.turn == 2]
    assert later and all(r.error.startswith("RuntimeError: turn 2 needs the token ids of the answer before it")
                         for r in later)


def sweep_yaml(tmp_path, workload: str, extra: str = "", backend: str = "name: hf, device: cpu, batching: "
               "continuous") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, weights: random, dtype: fp32}\n"
                    f"backends: [{{{backend}}}]\nworkload: {{prompts: {CONVERSATIONS}, {workload}}}\n"
                    "output_lengths: [8]\n" + extra)
    return path


STREAM = "scenario: stream\nstream: {request_rates: [2], num_requests: 4}\n"


@pytest.mark.parametrize("workload, extra, backend, message", [
    ("multi_turn: true", "batch_sizes: [1]\n", None,
     "workload.multi_turn: conversations are sent as request streams; set scenario: stream"),
    ("multi_turn: true", STREAM, "name: hf, device: cpu, batching: static",
     "backends[0].batching: static batches run on a schedule fixed before the stream starts, and a multi-turn "
     "conversation's next turn waits for its answer (workload.multi_turn); use batching: continuous"),
    ("multi_turn: true, max_turns: 0", STREAM, None, "workload.max_turns: must be at least 1 (or null), got 0"),
    ("multi_turn: true, turn_gap: gamma", STREAM, None, "workload.turn_gap: 'gamma' is not one of fixed, exponential"),
    ("multi_turn: true, turn_gap_s: -1", STREAM, None, "workload.turn_gap_s: must be a finite number of seconds in [0, "
                                                       "604800], got -1"),
    ("turn_gap_s: 2", STREAM, None, "workload.turn_gap_s: used with workload.multi_turn: true; set it, or remove "
     "turn_gap_s"),
    ("multi_turn: true, max_turns: 2", "scenario: stream\noutput_lengths: [1000]\n", None,
     "workload.max_turns: the longest conversation of CONVERSATIONS reaches NNN"),
])
def test_bad_multi_turn_config_exits_2_with_one_line(tmp_path, capsys, workload, extra, backend, message):
    kwargs = {"backend": backend} if backend else {}
    path = sweep_yaml(tmp_path, workload, extra, **kwargs)
    if "output_lengths: [1000]" in extra:
        path.write_text(path.read_text().replace("output_lengths: [8]\n", ""))
    assert main([str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    expected = f"error: {message.replace('CONVERSATIONS', str(CONVERSATIONS))}"
    if "NNN" in expected:
        head = expected.split(" NNN")[0]
        assert err.startswith(head) and err.endswith("set max_turns\n") and err.count("\n") == 1, err
    else:
        assert err == expected + "\n"

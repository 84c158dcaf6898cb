"""Multi-turn conversations from a prompt file (`workload.multi_turn: true`; docs/measurement.md, "Multi-turn
conversations"): each item's user turns, sent one after another, every later turn carrying the whole history with
the model's actual answers.

A conversation starts on the stream's arrival process; its turn k + 1 is due `turn_gap_s` (fixed, or exponential
with that mean) after turn k's last token. The harness tokenizes each later turn once, here: its message rendered
alone by the template (its markers, less a leading BOS); `harness.scenarios.stream.drive` puts the history's ids
and the answer's ids in front of it as the turn falls due. A server with `endpoint: chat` is sent the messages
instead, the answers as the assistant's, and applies its own template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from harness.config.stream import StreamConfig
from harness.errors import UserError
from harness.fields import WEEK_S, opt
from harness.plan.points import SweepPoint
from harness.scenarios.arrivals import PHASES, stream_arrivals
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec, Turns
from workloads.templates import render

TURN_GAPS = ("fixed", "exponential")
# The BOS markers a builtin template's text opens with: not repeated in front of every later turn.
_BOS_MARKERS = ("<|begin_of_text|>", "<s>")


@dataclass
class TurnOptions:
    """The multi-turn options of a prompt-file workload."""

    multi_turn: bool = opt(False, help="true: each item of the prompt file is a conversation; its user turns are sent "
                           "one after another (scenario: stream), each with the history and the model's answers.")
    turn_gap_s: float = opt(0.0, ge=0, le=WEEK_S, unit="seconds", help="Think time between an answer's last token "
                            "and the next turn, in seconds.")
    turn_gap: str = opt("fixed", help="fixed (exactly turn_gap_s) | exponential (seeded, mean turn_gap_s).")
    max_turns: Optional[int] = opt(None, help="Send at most this many user turns per conversation (null: all).")


def validate_turns(options: TurnOptions, config) -> None:
    if not options.multi_turn:
        for key, default in (("turn_gap_s", 0.0), ("turn_gap", "fixed"), ("max_turns", None)):
            if getattr(options, key) != default:
                raise UserError(f"workload.{key}: used with workload.multi_turn: true; set it, or remove {key}")
        return
    if config.scenario != "stream":
        raise UserError("workload.multi_turn: conversations are sent as request streams; set scenario: stream")
    if config.stream.arrival == "trace":
        raise UserError("workload.multi_turn: a trace gives every request's time; remove workload.multi_turn or "
                        "stream.arrival: trace")
    if options.turn_gap not in TURN_GAPS:
        raise UserError(f"workload.turn_gap: {options.turn_gap!r} is not one of {', '.join(TURN_GAPS)}")
    if options.max_turns is not None and options.max_turns < 1:
        raise UserError(f"workload.max_turns: must be at least 1 (or null), got {options.max_turns}")


def later_turn_ids(texts: Sequence[str], template: str, tokenizer) -> Tuple[Tuple[int, ...], ...]:
    """Each later user turn's own ids: its message rendered alone by the template (raw text after a blank line with
    `none`), without the BOS a builtin template's text opens with."""
    out = []
    for text in texts:
        rendered = "\n\n" + text if template == "none" else render(template, (("user", text),), None, tokenizer)
        for marker in _BOS_MARKERS + ((tokenizer.bos_token,) if getattr(tokenizer, "bos_token", None) else ()):
            if rendered.startswith(marker):
                rendered = rendered[len(marker):]
                break
        out.append(tuple(tokenizer(rendered, add_special_tokens=False)["input_ids"]))
    return tuple(out)


def conversation_tokens(first: Sequence[int], later: Sequence[Sequence[int]], output_length: int) -> int:
    """A conversation's prompt at its last turn: every turn's own tokens and every earlier answer."""
    return len(first) + sum(len(t) for t in later) + len(later) * output_length


def conversation_stream(conversations, point: SweepPoint, stream: StreamConfig, options: TurnOptions, forced: bool,
                        sampling, seeds_for) -> StreamSpec:
    """The timed stream of `conversations` (the workload's prompts, each with `later_ids` and `later_texts`): their
    turns as consecutive requests, first turns at the stream's arrival times. `seeds_for(count)` gives the requests'
    sampling seeds."""
    rate = point.request_rate
    assert rate is not None  # a rate search (`request_rates: auto`) runs each probe at a rate of its own
    starts = stream_arrivals(stream, rate, "timed")
    assert len(starts) == len(conversations), "one conversation per first-turn arrival"
    gaps = _gap_draws(options, stream.seed, sum(len(c.later_ids) for c in conversations))
    prompts: List[List[int]] = []
    budgets, messages, arrivals = [], [], []
    conversation, turn, follows, gap_s = [], [], [], []
    for c, item in enumerate(conversations):
        budget = min(point.output_length, item.max_tokens or point.output_length)
        own = [(item.token_ids, item.messages)] + [(ids, (("user", text),))
                                                   for ids, text in zip(item.later_ids, item.later_texts)]
        for k, (ids, message) in enumerate(own):
            follows.append(None if k == 0 else len(prompts) - 1)
            gap_s.append(0.0 if k == 0 else next(gaps))
            prompts.append(list(ids))
            budgets.append(budget)
            messages.append(tuple(message))
            arrivals.append(starts[c])
            conversation.append(c)
            turn.append(k + 1)
    requests = BatchSpec(prompts, tuple(budgets), forced, sampling, seeds_for(len(prompts)), tuple(messages))
    return StreamSpec(requests, tuple(arrivals), point.max_concurrency,
                      Turns(tuple(conversation), tuple(turn), tuple(follows), tuple(gap_s)), release=stream.release)


def _gap_draws(options: TurnOptions, seed: int, count: int):
    if options.turn_gap == "fixed":
        return iter([float(options.turn_gap_s)] * count)
    rng = np.random.default_rng(np.random.SeedSequence([seed, PHASES["timed"]], spawn_key=(4,)))
    return iter(rng.exponential(options.turn_gap_s, size=count).tolist())

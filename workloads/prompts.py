"""The `prompts` workload: a user's prompt file, through a chat template, tokenized once in the harness.

Templating and tokenizing happen here, once, so every engine is given identical token ids. The
file's prompts are shuffled with the sweep's seed (then cut to `num_prompts`); batch k of every
point takes the next `batch_size` of them, cycling, warm-up batches first. Every point therefore
starts from the same prompts, whatever the engine or batch size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from harness.files import beside_yaml
from harness.config.stream import StreamConfig
from harness.config.sweep import SweepConfig
from harness.errors import UserError
from harness.fields import opt
from harness.model.spec import ModelSpec
from harness.plan.points import SweepPoint
from harness.scenarios.answer_schema import load_answer_schema
from harness.scenarios.answer_tools import load_tools
from harness.scenarios.arrivals import stream_arrivals
from harness.scenarios.stream import StreamSpec
from workloads.base import Workload, WorkloadOptions
from workloads.conversations import (
    TurnOptions,
    conversation_stream,
    conversation_tokens,
    later_turn_ids,
    validate_turns,
)
from workloads.prompt_file import PromptFile, PromptRecord, read_prompt_file
from workloads.templates import check_template, render, with_system
from harness.model.tokenizer import load_tokenizer

TEMPLATE_HELP = ("chat (the tokenizer's chat template) | none (raw text) | llama-2 | llama-3 | mistral | chatml "
                 "(built in, no tokenizer template needed).")


@dataclass
class PromptsOptions(TurnOptions, WorkloadOptions):
    template: str = opt("chat", help=TEMPLATE_HELP)
    system_prompt: Optional[str] = opt(None, help="Added by the template where it has a system slot.")
    max_prompt_tokens: Optional[int] = opt(
        None, help="Prompts longer than this after templating are dropped (counted in the manifest)."
    )
    num_prompts: Optional[int] = opt(None, help="Use the first N prompts after a seeded shuffle; null: all.")
    json_schema: Optional[str] = opt(
        None, help="A JSON Schema file every answer is held to: openai entries ask the server to constrain its "
        "answers to it (guided_decoding) and every answer is checked against it (requests.csv's answer_valid, the "
        "row's invalid_answer_share). Needs stop_at_eos: true (an answer ends where its JSON does).")
    tools: Optional[str] = opt(
        None, help="A JSON file of tools in the Chat Completions API's shape ([{type: function, function: {name, "
        "description, parameters}}]) every answer is asked to call: openai entries send them in their API's shape "
        "(guided_decoding: a call is required) and each answer's call is checked against its tool's parameters "
        "(requests.csv's answer_valid, the row's invalid_answer_share). Needs stop_at_eos: true; not with "
        "json_schema or multi_turn.")

    def resolve_paths(self, config_dir: Path) -> None:
        super().resolve_paths(config_dir)
        self.prompts = beside_yaml(config_dir, self.prompts)
        for key in ("json_schema", "tools"):
            if getattr(self, key) is not None:
                setattr(self, key, beside_yaml(config_dir, getattr(self, key)))

    def validate(self, config: SweepConfig) -> None:
        if config.input_lengths is not None:
            raise UserError(f"input_lengths: a prompt file sets the prompt lengths (workload.prompts: "
                            f"{self.prompts}); remove input_lengths")
        check_template(self.template)
        for key in ("max_prompt_tokens", "num_prompts"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise UserError(f"workload.{key}: must be at least 1 (or null), got {value}")
        validate_turns(self, config)
        if self.json_schema is not None:
            if not self.stop_at_eos:
                raise UserError("workload.json_schema: an answer held to a schema ends where its JSON does; set "
                                "workload.stop_at_eos: true (output_lengths are then each answer's budget)")
            load_answer_schema(Path(self.json_schema))  # a small file, read as the sweep loads: a bad one is one line
        if self.tools is not None:
            if self.json_schema is not None:
                raise UserError("workload.tools: an answer is either a tool call or JSON held to workload.json_schema; "
                                "set one of them")
            if not self.stop_at_eos:
                raise UserError("workload.tools: an answer that calls a tool ends with its call; set "
                                "workload.stop_at_eos: true (output_lengths are then each answer's budget)")
            if self.multi_turn:
                raise UserError("workload.tools: a conversation's next turn would follow a tool call with no tool's "
                                "result; use single-turn prompts (workload.multi_turn: false)")
            load_tools(Path(self.tools))


@dataclass(frozen=True)
class Prompt:
    token_ids: Tuple[int, ...]
    max_tokens: Optional[int]  # the file's own cap for this prompt
    messages: Tuple[Tuple[str, str], ...]  # the conversation the ids render, system prompt included
    later_ids: Tuple[Tuple[int, ...], ...] = ()  # multi-turn: each later user turn's own ids (conversations.py)
    later_texts: Tuple[str, ...] = ()


class PromptsWorkload(Workload[PromptsOptions]):
    Options = PromptsOptions

    def __init__(self, options: PromptsOptions, config: SweepConfig, prompts: List[Prompt], facts: Dict[str, Any]):
        super().__init__(options, config)
        self.options, self.pool, self.facts = options, prompts, facts  # pool: the shuffled prompts batches draw
        self.num_warmup_batches = config.num_warmup_batches
        lengths = [len(p.token_ids) for p in prompts]
        self.mean_length, self.longest = round(float(np.mean(lengths))), max(lengths)
        self.all_ids = [t for p in prompts for t in p.token_ids]  # what `filler` cuts from, and where each prompt starts
        self.starts = [int(x) for x in np.cumsum([0] + lengths[:-1])]
        self.answer_schema = ""  # workload.json_schema's text (build), which every request's answer is held to
        self.answer_tools = ""  # workload.tools' text (build), which every request's answer is asked to call

    @classmethod
    def build(cls, options: PromptsOptions, config: SweepConfig, model: ModelSpec) -> "PromptsWorkload":
        file = read_prompt_file(Path(options.prompts))
        tokenizer = load_tokenizer(model)
        prompts, facts = prepare(file, options, tokenizer, config.seed)
        if config.input_lengths is None and config.stream.arrival != "trace":  # a trace's lengths are checked apart
            check_fits(prompts, options, config, model)
        facts.update(tokenizer=tokenizer.name_or_path, sha256=file.sha256, prompts_in_file=len(file.records),
                     sharegpt_items_skipped=file.skipped)
        workload = cls(options, config, prompts, facts)
        if options.json_schema is not None:
            workload.answer_schema = load_answer_schema(Path(options.json_schema))
            facts["json_schema"] = options.json_schema
        if options.tools is not None:
            workload.answer_tools = load_tools(Path(options.tools))
            facts["tools"] = options.tools
        return workload

    @property
    def source_name(self) -> str:
        return f"{Path(self.options.prompts).name} ({self.options.template})"

    def source_input_lengths(self) -> List[int]:
        return [self.mean_length]

    def prompts(self, point: SweepPoint, phase: str, index: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        size = point.batch_size
        assert size is not None  # a batch search's probes have theirs (the runner's); a stream's: stream_prompts
        slot = index + (self.num_warmup_batches if phase == "timed" else 0)
        chosen = [self.pool[(slot * size + i) % len(self.pool)] for i in range(size)]
        budgets = tuple(min(point.output_length, p.max_tokens or point.output_length) for p in chosen)
        return [list(p.token_ids) for p in chosen], budgets

    def source_longest_input(self, point: SweepPoint) -> int:
        """The longest first prompt, or in a multi-turn stream the longest prompt of a last turn (history and
        answers included)."""
        if not self.options.multi_turn:
            return self.longest
        return max(conversation_tokens(p.token_ids, p.later_ids, point.output_length) for p in self.pool)

    def stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec:
        """The stream, its requests carrying the answer schema or the tools where the workload has them."""
        spec = self._stream(point, phase, stream)
        if not (self.answer_schema or self.answer_tools):
            return spec
        requests = dataclasses.replace(spec.requests, answer_schema=self.answer_schema, answer_tools=self.answer_tools)
        return dataclasses.replace(spec, requests=requests)

    def _stream(self, point: SweepPoint, phase: str, stream: StreamConfig) -> StreamSpec:
        """A multi-turn stream's timed requests are its conversations' turns; its warm-up requests first turns only
        (they warm the engine up; the timed conversations share nothing with them)."""
        if not self.options.multi_turn or phase == "warmup":
            return super().stream(point, phase, stream)
        assert point.request_rate is not None  # a rate search's probes each have theirs
        # arrival: stages: as many conversations as its schedule holds first turns
        conversations = self._stream_pool(phase, len(stream_arrivals(stream, point.request_rate, phase)))
        conversations = [dataclasses.replace(c, token_ids=tuple(self.prefixed([list(c.token_ids)], i)[0]))
                         for i, c in enumerate(conversations)]
        return conversation_stream(conversations, point, stream, self.options, self.forced, self.sampling,
                                   lambda count: self.stream_seeds(point, phase, count))

    def filler(self, key: Tuple[int, ...], length: int) -> List[int]:
        """The file's prompts end to end, cycled, from the start of prompt `hash(key)` of the pool: real text cut to
        the length asked for (a key of ints hashes the same in every process)."""
        start = self.starts[hash(key) % len(self.pool)]
        return [self.all_ids[(start + i) % len(self.all_ids)] for i in range(length)]

    def _stream_pool(self, phase: str, count: int) -> List[Prompt]:
        """Timed requests take the pool in order from its start (cycling); warm-up ones from its end, backwards."""
        order = range(count) if phase == "timed" else (len(self.pool) - 1 - i for i in range(count))
        return [self.pool[i % len(self.pool)] for i in order]

    def stream_prompts(self, point: SweepPoint, phase: str, count: int) -> Tuple[List[List[int]], Tuple[int, ...]]:
        chosen = self._stream_pool(phase, count)
        budgets = tuple(min(point.output_length, p.max_tokens or point.output_length) for p in chosen)
        return [list(p.token_ids) for p in chosen], budgets

    def stream_messages(self, phase: str, count: int) -> Tuple[Tuple[Tuple[str, str], ...], ...]:
        return tuple(p.messages for p in self._stream_pool(phase, count))

    def prompt_summary(self) -> str:
        f = self.facts
        dropped = f["dropped_over_max_prompt_tokens"]
        text = (f"{self.source_name}: {f['prompts_used']} of {f['prompts_in_file']} prompts, mean {self.mean_length} "
                "tokens after templating" + (f", {dropped} dropped as too long" if dropped else ""))
        if self.options.multi_turn:
            turns = [1 + len(p.later_ids) for p in self.pool]
            text += (f"; conversations of {min(turns)}-{max(turns)} user turns (mean {np.mean(turns):.1f}), "
                     f"{self.options.turn_gap} gap {self.options.turn_gap_s:g} s")
        if self.options.json_schema is not None:
            text += f"; answers held to {self.options.json_schema}"
        if self.options.tools is not None:
            text += f"; answers call a tool of {self.options.tools}"
        return text

    def manifest(self) -> Dict[str, Any]:
        return {**super().manifest(), "file": self.options.prompts, "template": self.options.template,
                "system_prompt": self.options.system_prompt, "mean_prompt_tokens": self.mean_length, **self.facts}


def prepare(file: PromptFile, options: PromptsOptions, tokenizer, seed: int) -> Tuple[List[Prompt], Dict[str, Any]]:
    """Shuffle, render, tokenize and drop the too-long, until `num_prompts` are kept (or the file ends).

    Only the prompts looked at are tokenized, so a 90k-conversation export with num_prompts: 500
    costs 500 tokenizations, not 90k.
    """
    order = np.random.default_rng(seed).permutation(len(file.records))
    wanted = options.num_prompts or len(order)
    kept: List[Prompt] = []
    dropped, shortest_dropped, first_text = 0, None, None
    for i in order:
        text, ids = encode(file.records[i], options, tokenizer)
        if options.max_prompt_tokens and len(ids) > options.max_prompt_tokens:
            dropped += 1
            shortest_dropped = min(shortest_dropped or len(ids), len(ids))
            continue
        first_text = first_text if first_text is not None else text
        record = file.records[i]
        messages = record.first_turn() if options.multi_turn else record.messages
        later = record.later_turns[:options.max_turns - 1 if options.max_turns else None] if options.multi_turn else ()
        kept.append(Prompt(tuple(ids), record.max_tokens, with_system(messages, options.system_prompt),
                           later_turn_ids(later, options.template, tokenizer), tuple(later)))
        if len(kept) == wanted:
            break
    if not kept:
        raise UserError(f"workload.max_prompt_tokens: every prompt of {file.path} is longer than "
                        f"{options.max_prompt_tokens} tokens after templating (shortest: {shortest_dropped})")
    facts = {"prompts_used": len(kept), "dropped_over_max_prompt_tokens": dropped,
             "first_prompt_text": first_text, "first_prompt_tokens": len(kept[0].token_ids)}
    return kept, facts


def encode(record: PromptRecord, options: PromptsOptions, tokenizer) -> Tuple[str, List[int]]:
    """The rendered text and its ids. Only raw text gets the tokenizer's own specials (BOS): a template's
    text already holds the markers its format wants, as `apply_chat_template` assumes too."""
    messages = record.first_turn() if options.multi_turn else record.messages
    text = render(options.template, messages, options.system_prompt, tokenizer)
    ids = tokenizer(text, add_special_tokens=options.template == "none")["input_ids"]
    return text, list(ids)


def check_fits(prompts: List[Prompt], options: PromptsOptions, config: SweepConfig, model: ModelSpec) -> None:
    outputs = config.output_lengths
    assert outputs is not None  # load_config requires output_lengths (or takes them from a trace)
    if options.multi_turn:
        output = max(outputs)
        longest = max(conversation_tokens(p.token_ids, p.later_ids, output) + output for p in prompts)
        if longest > model.max_positions:
            raise UserError(f"workload.max_turns: the longest conversation of {options.prompts} reaches {longest} "
                            f"tokens by the end of its last turn (output {output} per turn), over {model.label}'s "
                            f"max_position_embeddings ({model.max_positions}); set max_turns")
        return
    longest = max(len(p.token_ids) for p in prompts)
    total = longest + max(outputs)
    if total > model.max_positions:
        raise UserError(
            f"workload.max_prompt_tokens: the longest prompt of {options.prompts} has {longest} tokens; with output "
            f"{max(outputs)} that is {total}, over {model.label}'s max_position_embeddings "
            f"({model.max_positions}); set max_prompt_tokens to drop longer prompts"
        )

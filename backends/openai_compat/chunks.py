"""What one response's SSE chunks say: how many tokens each carries (what the client stamps), the text, and the
server's own token counts.

Servers differ in what a chunk holds, and the count must not depend on it:
- vLLM with `stream_options.continuous_usage_stats`: every chunk has the running `usage.completion_tokens`, so a
  chunk carries the difference (more than one where steps coalesce; 0 for the chat role chunk).
- vLLM without it, SGLang, TGI: one token per chunk, as vLLM's serving benchmark counts; the text may be empty
  (a special token, or half of a UTF-8 character) and still be a token.
- transformers serve: chunks carry text only where it decodes to some (several tokens may come as one), and
  `usage` once, on the closing chunk.
- chat: a first chunk with only `delta.role` (no token), then `delta.content`; a reasoning model's thinking first,
  as `delta.reasoning_content` (vLLM; later `delta.reasoning`): output tokens too, counted apart from the answer.
  A tool call comes as `delta.tool_calls`: its `index`, its `function.name` once, its `function.arguments` in
  pieces (the answer: tokens like text; a server may hold back the tokens around a call and send them in one chunk).
- The end: `data: [DONE]` (vLLM, SGLang, TGI), or only a chunk with a `finish_reason` (transformers serve); a
  connection closed before either is a broken response.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

# Where the output token count comes from (the requests' `output_tokens_source`).
SOURCES = ("usage", "tokenizer", "chunks")


@dataclass
class ResponseReading:
    """A response read chunk by chunk (`read`), then counted (`output_tokens`)."""

    chat: bool
    counted: int = 0  # tokens stamped so far
    usage_output_tokens: Optional[int] = None
    usage_input_tokens: Optional[int] = None
    usage_cached_tokens: Optional[int] = None  # usage.prompt_tokens_details.cached_tokens, where the server gives it
    running_usage: bool = False  # usage before the last chunk: the server counts as it goes
    finished: bool = False  # a choice had its finish_reason: the response is whole, [DONE] or not
    texts: List[str] = field(default_factory=list)  # the answer's text
    token_ids: List[int] = field(default_factory=list)
    # Reasoning streamed apart from the answer (docs/measurement.md, "Reasoning tokens"): its text, the tokens the
    # chunks carrying it counted, the server's own count where its usage has one, and whether the chunk last read
    # carried answer tokens (what the client stamps the first answer token by).
    reasoning_texts: List[str] = field(default_factory=list)
    reasoning_counted: int = 0
    usage_reasoning_tokens: Optional[int] = None
    answered: bool = False
    # Tool calls as streamed: each call's position in the answer -> [its name, its arguments so far].
    calls: Dict[int, List[str]] = field(default_factory=dict)

    def read(self, chunk: Dict[str, Any]) -> int:
        """Take one parsed `data:` payload; return how many tokens it carries (0: none, nothing to stamp)."""
        if chunk.get("error"):
            raise RuntimeError(f"server error mid-stream: {' '.join(str(chunk['error']).split())[:300]}")
        usage = chunk.get("usage") or {}
        choices = chunk.get("choices") or []
        choice = choices[0] if choices else {}
        if usage.get("prompt_tokens") is not None:
            self.usage_input_tokens = int(usage["prompt_tokens"])
        details = usage.get("prompt_tokens_details") or {}
        if details.get("cached_tokens") is not None:
            self.usage_cached_tokens = int(details["cached_tokens"])
        if usage.get("completion_tokens") is not None:
            self.usage_output_tokens = int(usage["completion_tokens"])
            self.running_usage |= bool(choices) and choice.get("finish_reason") is None
        reasoning_tokens = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        if reasoning_tokens is not None:
            self.usage_reasoning_tokens = int(reasoning_tokens)
        self.answered = False
        if not choices:
            return 0  # the usage-only chunk that ends a stream
        self.finished |= choice.get("finish_reason") is not None
        (text, reasoning), ids = self._text(choice), choice.get("token_ids") or []  # token_ids: vLLM's return_token_ids
        if self.chat:
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                function = call.get("function") or {}
                self.call(call.get("index", 0), function.get("name"), function.get("arguments"))
        if text:
            self.texts.append(text)
        if reasoning:
            self.reasoning_texts.append(reasoning)
        self.token_ids.extend(ids)
        answer, text = text, text or reasoning  # below: whether the chunk carries a token, whichever part it is of
        if usage.get("completion_tokens") is not None and (self.running_usage or not self.counted):
            # the server's running count; or a whole answer in one closing chunk (a one-token answer from vLLM), whose
            # only token may have empty text
            assert self.usage_output_tokens is not None  # set from this chunk's completion_tokens above
            count = self.usage_output_tokens - self.counted
        elif ids:
            count = len(ids)
        elif text:
            count = 1
        elif choice.get("finish_reason") is None and not (self.chat and "role" in (choice.get("delta") or {})):
            count = 1  # a token whose text is empty
        else:
            count = 0  # the chat role chunk, or a closing chunk with no text
        self.counted += max(count, 0)
        if count > 0 and reasoning and not answer:
            self.reasoning_counted += count
        else:
            self.answered = count > 0
        return count

    def _text(self, choice: Dict[str, Any]) -> Tuple[str, str]:
        """(the answer's text, the reasoning's) of one chunk: reasoning models stream their thinking apart from the
        answer (vLLM's `reasoning_content`, later `reasoning`); both are output tokens."""
        if not self.chat:
            return choice.get("text") or "", ""
        delta = choice.get("delta") or {}
        return delta.get("content") or "", "".join(delta.get(k) or "" for k in ("reasoning_content", "reasoning"))

    def call(self, index: Optional[int], name: Optional[str], arguments: Any) -> None:
        """A piece of tool call `index`: its name (sent once), more of its arguments (text; a server that sends
        them as an object: that object's JSON)."""
        entry = self.calls.setdefault(int(index or 0), ["", ""])  # a server that sends no index: one call
        entry[0] = name or entry[0]
        entry[1] += arguments if isinstance(arguments, str) else json.dumps(arguments) if arguments else ""

    @property
    def tool_calls(self) -> List[Tuple[str, str]]:
        """The answer's calls in order, (name, arguments) each."""
        return [(name, arguments) for _, (name, arguments) in sorted(self.calls.items())]

    @property
    def reasoning_tokens(self) -> Optional[int]:
        """The server's count of reasoning tokens where its usage has one above 0 (OpenAI's reasoning models count
        reasoning they do not stream), else the tokens of the chunks that carried reasoning (vLLM 0.32's chat usage
        says 0 while its reasoning parser streams reasoning); None for an answer with none (nothing streamed as
        reasoning and no count above 0)."""
        if self.usage_reasoning_tokens:
            return self.usage_reasoning_tokens
        return self.reasoning_counted if self.reasoning_texts else None

    def output_tokens(self, tokenizer=None) -> Tuple[int, str]:
        """The response's output token count and its source: the server's `usage`; else the text re-tokenized with
        the model's tokenizer (exact for real weights; random weights' text does not survive it); else the chunks."""
        if self.usage_output_tokens is not None:
            return self.usage_output_tokens, "usage"
        if tokenizer is not None and (self.texts or self.reasoning_texts):
            text = "".join(self.reasoning_texts + self.texts)
            return len(tokenizer(text, add_special_tokens=False)["input_ids"]), "tokenizer"
        return self.counted, "chunks"

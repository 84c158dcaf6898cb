"""What the Responses API's and the Messages API's streamed events say, read into the same counts as a chat
chunk's (backends/openai_compat/chunks.py): tokens per event (what the client stamps), the text, the server's
usage, and whether the response ended whole.

Neither API streams a running token count, so each event that carries output text is one token, as vLLM's serving
benchmark counts chat chunks without usage; the total is the server's own `usage` at the end, and an event that
carries several tokens (steps coalesced) makes one longer gap, never a lost token (docs/measurement.md, "Request
streams": `openai` with `endpoint: responses` or `messages`).

- Responses (`POST /v1/responses`, OpenAI's): `response.output_text.delta` and `response.reasoning_text.delta`
  carry text (`delta`), `response.function_call_arguments.delta` a tool call's arguments (the call's `output_index`;
  its name came in `response.output_item.added`); the last event is `response.completed`, or `response.incomplete` where the budget ran
  out (OpenAI; vLLM says `completed` with `incomplete_details`), with `response.usage`: `input_tokens`,
  `output_tokens` and `input_tokens_details.cached_tokens`. `response.failed` and `error` are errors.
- Messages (`POST /v1/messages`, Anthropic's): `message_start` carries `message.usage` (its `input_tokens` leave
  out `cache_read_input_tokens` and `cache_creation_input_tokens`: the prompt is their sum),
  `content_block_delta` carries `text_delta`, `thinking_delta` or a tool call's `input_json_delta` (the call's name
  came in its block's `content_block_start`),
  `message_delta` the final `usage.output_tokens`, and `message_stop` ends it; `ping` is nothing, `error` an
  error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

from backends.openai_compat.chunks import ResponseReading

RESPONSES_TEXT_EVENTS = ("response.output_text.delta", "response.reasoning_text.delta")
RESPONSES_CALL_EVENT = "response.function_call_arguments.delta"
REASONING_EVENTS = ("response.reasoning_text.delta", "thinking_delta")  # the rest of the text is the answer's
RESPONSES_END_EVENTS = ("response.completed", "response.incomplete")
MESSAGES_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking"}


def _error(detail: Any) -> RuntimeError:
    return RuntimeError(f"server error mid-stream: {' '.join(str(detail).split())[:300]}")


@dataclass
class EventReading(ResponseReading):
    """An API that streams typed events, a token per text event (below: the Responses and Messages APIs)."""

    chat: bool = True  # conversations: both APIs take messages, never token ids

    def token(self, text: str, reasoning: bool = False) -> None:
        """One token of a text event: the answer's, or the reasoning's (a tool call's arguments: no text here)."""
        (self.reasoning_texts if reasoning else self.texts).extend([text] if text else [])
        self.counted += 1  # an event per step: one token, or several coalesced (usage has the total)
        self.reasoning_counted += reasoning
        self.answered = not reasoning


@dataclass
class ResponsesReading(EventReading):
    """A `/v1/responses` stream, event by event."""

    def read(self, chunk: Dict[str, Any]) -> int:
        self.answered = False
        kind = chunk.get("type")
        if kind == "error" or kind == "response.failed":
            response = chunk.get("response") or {}
            raise _error(chunk.get("message") or response.get("error") or chunk)
        if kind in RESPONSES_TEXT_EVENTS:
            self.token(chunk.get("delta") or "", kind in REASONING_EVENTS)
            return 1
        if kind == RESPONSES_CALL_EVENT:
            self.call(chunk.get("output_index", 0), None, chunk.get("delta"))
            self.token("")
            return 1
        item = chunk.get("item") or {}
        if kind == "response.output_item.added" and item.get("type") == "function_call":
            self.call(chunk.get("output_index", 0), item.get("name"), item.get("arguments"))
        if kind in RESPONSES_END_EVENTS:
            self.finished = True
            self._usage((chunk.get("response") or {}).get("usage") or {})
        return 0

    def _usage(self, usage: Dict[str, Any]) -> None:
        if usage.get("input_tokens") is not None:
            self.usage_input_tokens = int(usage["input_tokens"])
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
        if cached is not None:
            self.usage_cached_tokens = int(cached)
        if usage.get("output_tokens") is not None:
            self.usage_output_tokens = int(usage["output_tokens"])
        reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
        if reasoning is not None:
            self.usage_reasoning_tokens = int(reasoning)


@dataclass
class MessagesReading(EventReading):
    """A `/v1/messages` stream, event by event."""

    def read(self, chunk: Dict[str, Any]) -> int:
        self.answered = False
        kind = chunk.get("type")
        if kind == "error":
            raise _error(chunk.get("error") or chunk)
        if kind == "content_block_delta":
            delta = chunk.get("delta") or {}
            if delta.get("type") == "input_json_delta":  # a tool call's arguments
                self.call(chunk.get("index", 0), None, delta.get("partial_json"))
                self.token("")
                return 1
            field = MESSAGES_DELTA_FIELDS.get(delta.get("type", ""))
            if field is None:
                return 0  # a thinking block's signature: no token
            self.token(delta.get(field) or "", delta.get("type") in REASONING_EVENTS)
            return 1
        block = chunk.get("content_block") or {}
        if kind == "content_block_start" and block.get("type") == "tool_use":
            self.call(chunk.get("index", 0), block.get("name"), None)  # `input` is {} here: the deltas fill it
        elif kind == "message_start":
            self._usage((chunk.get("message") or {}).get("usage") or {})
        elif kind == "message_delta":
            self._usage(chunk.get("usage") or {})
        elif kind == "message_stop":
            self.finished = True
        return 0

    def _usage(self, usage: Dict[str, Any]) -> None:
        read, created = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
        if usage.get("input_tokens") is not None:
            self.usage_input_tokens = int(usage["input_tokens"]) + int(read or 0) + int(created or 0)
        if read is not None:
            self.usage_cached_tokens = int(read)
        if usage.get("output_tokens") is not None:
            self.usage_output_tokens = int(usage["output_tokens"])

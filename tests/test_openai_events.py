"""The Responses and Messages APIs' streamed events read into token counts, text and usage (backends/openai_compat/
events.py), in the shapes vLLM 0.32 sends on this machine and the shapes OpenAI's and Anthropic's documentation give
(`response.incomplete`, prompt caching's usage, thinking blocks, `ping`). The servers themselves:
tests/test_openai_server.py."""

import pytest

from backends.openai_compat.events import MessagesReading, ResponsesReading


def read_all(reading, events):
    return [reading.read(e) for e in events]


def responses_usage(input_tokens, output_tokens, cached=0, reasoning=0):
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens}


def response_event(kind, usage=None, status="in_progress"):
    return {"type": kind, "response": {"status": status, "output": [], "usage": usage}}


def test_a_responses_stream_counts_a_token_per_text_event_and_takes_usage_at_the_end():
    events = [response_event("response.created"), response_event("response.in_progress"),
              {"type": "response.output_item.added", "item": {"type": "message"}},
              {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}},
              {"type": "response.output_text.delta", "delta": "Hel"},
              {"type": "response.output_text.delta", "delta": "lo"},
              {"type": "response.output_text.done", "text": "Hello"},
              response_event("response.completed", responses_usage(13, 3, cached=8), "incomplete")]
    reading = ResponsesReading()
    assert read_all(reading, events) == [0, 0, 0, 0, 1, 1, 0, 0]
    assert reading.finished and "".join(reading.texts) == "Hello"
    # three tokens in two events (two steps coalesced): the server's count, the gaps one fewer than the events
    assert reading.output_tokens() == (3, "usage")
    assert (reading.usage_input_tokens, reading.usage_cached_tokens) == (13, 8)


def test_reasoning_is_output_apart_from_the_answer_and_response_incomplete_ends_the_stream():
    """Reasoning and answer tokens are both output, counted apart (the server's reasoning count where its usage has
    one); the first answer token is the first event of the answer. OpenAI ends a response cut by max_output_tokens
    with `response.incomplete`, not `completed`."""
    events = [{"type": "response.reasoning_text.delta", "delta": "think"},
              {"type": "response.reasoning_text.delta", "delta": " more"},
              {"type": "response.output_text.delta", "delta": "ok"},
              response_event("response.incomplete", responses_usage(4, 5, reasoning=4), "incomplete")]
    reading = ResponsesReading()
    answered = []
    for event in events:
        reading.read(event)
        answered.append(reading.answered)
    assert answered == [False, False, True, False] and reading.finished
    assert reading.output_tokens() == (5, "usage") and reading.texts == ["ok"]
    assert reading.reasoning_texts == ["think", " more"] and reading.reasoning_counted == 2
    assert reading.reasoning_tokens == 4  # the server's count: its events coalesced steps


def test_a_responses_stream_cut_short_is_not_finished():
    reading = ResponsesReading()
    read_all(reading, [response_event("response.created"), {"type": "response.output_text.delta", "delta": "a"}])
    assert not reading.finished and reading.output_tokens() == (1, "chunks")


@pytest.mark.parametrize("event, message", [
    ({"type": "error", "code": "server_error", "message": "the engine  died"}, "the engine died"),
    ({"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error",
                                                                             "message": "out of memory"}}},
     "out of memory"),
])
def test_a_responses_error_event_ends_the_request_with_its_message(event, message):
    with pytest.raises(RuntimeError, match=f"^server error mid-stream: .*{message}"):
        ResponsesReading().read(event)


def message_usage(input_tokens, output_tokens, **cache):
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, **cache}


def test_a_messages_stream_as_vllm_sends_it():
    """message_start with the prompt's count, a text block of deltas, message_delta with the output's count."""
    events = [{"type": "message_start", "message": {"role": "assistant", "content": [],
                                                    "usage": message_usage(12, 0)}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "2, 3"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " and 5"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": message_usage(12, 4)},
              {"type": "message_stop"}]
    reading = MessagesReading()
    assert read_all(reading, events) == [0, 0, 1, 1, 0, 0, 0]
    assert reading.finished and reading.output_tokens() == (4, "usage") and reading.usage_input_tokens == 12


def test_messages_count_the_cached_prompt_in_the_prompt_and_thinking_as_output():
    """Anthropic's input_tokens leave out the tokens read from or written to its cache: the prompt is the sum.
    A thinking block's deltas are output tokens; its signature is not a token; `ping` is nothing."""
    events = [{"type": "message_start", "message": {"usage": message_usage(5, 1, cache_read_input_tokens=100,
                                                                           cache_creation_input_tokens=20)}},
              {"type": "ping"},
              {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hmm"}},
              {"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": "EqQB"}},
              {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{\"a\""}},
              {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "yes"}},
              {"type": "message_delta", "usage": {"output_tokens": 9}}, {"type": "message_stop"}]
    reading = MessagesReading()
    assert read_all(reading, events) == [0, 0, 1, 0, 1, 1, 0, 0]
    assert (reading.usage_input_tokens, reading.usage_cached_tokens) == (125, 100)
    assert reading.output_tokens() == (9, "usage") and reading.texts == ["yes"]  # a call's arguments: not text
    assert reading.tool_calls == [("", "{\"a\"")]  # a call whose start was not read has no name
    assert reading.reasoning_texts == ["hmm"] and reading.reasoning_tokens == 1  # Anthropic's usage has no count


def test_a_messages_error_event_ends_the_request_and_a_cut_stream_is_not_finished():
    with pytest.raises(RuntimeError, match="^server error mid-stream: .*overloaded"):
        MessagesReading().read({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    reading = MessagesReading()
    read_all(reading, [{"type": "message_start", "message": {"usage": message_usage(3, 0)}},
                       {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "a"}}])
    assert not reading.finished


def test_a_responses_tool_call_is_read_from_its_item_and_argument_deltas():
    """As vLLM 0.32 streams a call under tool_choice: required: the call's name in `response.output_item.added`,
    its arguments in pieces (each a token, none of them answer text), the whole again in `.done` (not read twice)."""
    events = [response_event("response.created"),
              {"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "function_call", "name": "get_time", "arguments": "", "call_id": "c0"}},
              {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"ci'},
              {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": 'ty":"Oslo"}'},
              {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": '{"city":"Oslo"}'},
              {"type": "response.output_item.done", "output_index": 0,
               "item": {"type": "function_call", "name": "get_time", "arguments": '{"city":"Oslo"}'}},
              response_event("response.completed", responses_usage(30, 14), "completed")]
    reading = ResponsesReading()
    assert read_all(reading, events) == [0, 0, 1, 1, 0, 0, 0]
    assert reading.tool_calls == [("get_time", '{"city":"Oslo"}')] and reading.texts == []
    assert reading.answered is False and reading.output_tokens() == (14, "usage")


def test_a_messages_tool_use_block_is_read_from_its_start_and_json_deltas():
    """Anthropic's shape (vLLM 0.32 sends the same): a tool_use block's name at its start, `input` empty there, its
    arguments as input_json_delta pieces, after a text block."""
    events = [{"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sure."}},
              {"type": "content_block_stop", "index": 0},
              {"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": "t1", "name": "get_time", "input": {}}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
              {"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}},
              {"type": "content_block_stop", "index": 1},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}},
              {"type": "message_stop"}]
    reading = MessagesReading()
    assert read_all(reading, events) == [0, 0, 1, 0, 0, 1, 1, 0, 0, 0]
    assert reading.tool_calls == [("get_time", '{"city": "Oslo"}')] and reading.texts == ["Sure."]
    assert reading.finished and reading.output_tokens() == (12, "usage")


def test_chat_tool_calls_are_read_by_index_across_chunks():
    """The Chat Completions shape (vLLM 0.32's under tool_choice: required): the call's id and name once, then its
    arguments in pieces; running usage counts the tokens a chunk carries, the envelope's included."""
    from backends.openai_compat.chunks import ResponseReading

    def chunk(delta, completion_tokens, finish=None):
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": {"prompt_tokens": 30, "completion_tokens": completion_tokens}}

    call = {"index": 0, "id": "c0", "type": "function", "function": {"name": "get_weather"}}
    chunks = [chunk({"role": "assistant", "content": ""}, 0),
              chunk({"content": None, "tool_calls": [call]}, 0),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Rome",'}}]}, 12),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"days":2,"metric":true}'}}]}, 20),
              chunk({}, 21, finish="tool_calls")]
    reading = ResponseReading(chat=True)
    assert read_all(reading, chunks) == [0, 0, 12, 8, 1]
    assert reading.tool_calls == [("get_weather", '{"city":"Rome","days":2,"metric":true}')]
    assert reading.texts == [] and reading.finished


def test_a_call_without_an_index_or_with_arguments_as_an_object_is_still_read():
    """Servers that leave out a call's index (one call), or send its arguments whole as an object, not text."""
    from backends.openai_compat.chunks import ResponseReading

    reading = ResponseReading(chat=True)
    reading.read({"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
        {"index": None, "function": {"name": "get_time", "arguments": {"city": "Oslo"}}}]}}]})
    assert reading.tool_calls == [("get_time", '{"city": "Oslo"}')]

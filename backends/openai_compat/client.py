"""The `openai` backend's HTTP client: a stream's requests as streamed `POST /v1/completions` calls with the prompt as
token ids, or calls with its conversation to `/v1/chat/completions`, OpenAI's `/v1/responses` or Anthropic's
`/v1/messages`; every SSE event that carries tokens is stamped on arrival with the harness's clock (chat and
completions chunks are read by backends/openai_compat/chunks.py, the other two APIs' events by events.py). Embeddings
and rerank requests, whose answers come whole, are written and read by pooling.py.

Apart from backend.py, which finds or starts the server and checks that it answers: sending and timing need only
its URL, so they read the same whoever started it.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, AsyncGenerator, Dict, List, Optional, Tuple

from backends.openai_compat.chunks import ResponseReading
from backends.openai_compat import pooling
from backends.openai_compat.images import Image, ImagesConfig, request_images, with_images
from backends.openai_compat.events import MessagesReading, ResponsesReading
from harness.errors import ShortOutputError
from harness.scenarios.answer_schema import answer_valid
from harness.scenarios.answer_tools import EMPTY_PARAMETERS, calls_valid
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec, StreamTiming, Submitted, TokenClock, drive

# Body fields the harness sets from the sweep (prompt, budget, sampling, seed): extra_body may not change them.
HARNESS_FIELDS = ("model", "prompt", "messages", "max_tokens", "min_tokens", "ignore_eos", "generation_config",
                  "stream", "stream_options", "temperature", "top_p", "top_k", "seed", "n", "input",
                  "max_output_tokens", "system", "store", "query", "documents")
ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "responses": "/v1/responses",
             "messages": "/v1/messages", "embeddings": "/v1/embeddings", "rerank": "/v1/rerank"}
CONVERSATION_ENDPOINTS = ("chat", "responses", "messages")  # sent a prompt file's messages, not token ids
READERS = {"completions": ResponseReading, "chat": ResponseReading, "responses": ResponsesReading,
           "messages": MessagesReading}
# Where each API takes the schema its answers are held to (workload.json_schema, guided_decoding).
SCHEMA_FIELDS = {"chat": "response_format", "responses": "text", "messages": "output_config"}
# What each API takes the workload's tools in (workload.tools); each is set by the harness when there are tools.
TOOL_FIELDS = {"chat": ("tools", "tool_choice", "parallel_tool_calls"),
               "responses": ("tools", "tool_choice", "parallel_tool_calls"), "messages": ("tools", "tool_choice")}
ANTHROPIC_VERSION = "2023-06-01"  # the Messages API's version header, which Anthropic requires
EXTENSIONS = ("vllm", "transformers", "none")


@dataclass
class CompletionsClient:
    """Where a stream's requests go (`base_url`, `model`, `headers`) and what each one carries besides its prompt,
    budget, sampling and seed; the backend's options, resolved once the server answers."""

    base_url: str
    model: str
    headers: Dict[str, str]
    request_timeout_s: float
    continuous_usage_stats: bool
    extra_body: Dict[str, Any]
    endpoint: str = "completions"
    extensions: str = "vllm"
    tokenizer: Any = None  # counts the output where the server sends no usage
    guided_decoding: bool = True  # with an answer schema: ask the server to hold answers to it
    inputs_per_request: int = 1  # embeddings and rerank: the inputs (documents) each request carries
    images: Optional[ImagesConfig] = None  # images sent with each chat request's text
    _streams: int = field(default=0, repr=False)  # streams served so far: seeds each one's generated images
    _images: List[Tuple[Image, ...]] = field(default_factory=list, repr=False)  # the current stream's, per request

    @property
    def url(self) -> str:
        return self.base_url + ENDPOINTS[self.endpoint]

    async def serve(self, stream: StreamSpec) -> StreamTiming:
        import aiohttp

        bodies = self.request_bodies(stream)  # serialized before the clock starts (a later turn's: when it is due)
        timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
        # limit=0: no connection pool cap, so max_concurrency (in `drive`) is the only one.
        connector = aiohttp.TCPConnector(limit=0)
        # read_bufsize: room for long SSE lines (a first chunk may echo the prompt's ids).
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=self.headers,
                                         read_bufsize=1 << 20) as session:
            return await drive(stream, partial(self._submit, session, bodies, stream))

    def request_bodies(self, stream: StreamSpec) -> List[Optional[bytes]]:
        """One JSON body per request (None for a later turn of a conversation, whose prompt is not known yet)."""
        if self.endpoint in pooling.POOLING_ENDPOINTS:
            return [pooling.request_body(self.endpoint, self.model, stream, i, self.inputs_per_request,
                                         self.tokenizer, self.extra_body) for i in range(stream.num_requests)]
        if self.endpoint in CONVERSATION_ENDPOINTS and not stream.requests.messages:
            raise RuntimeError(f"endpoint: {self.endpoint} needs the prompts' conversations (a prompt file), and "
                               "this stream has token ids only")
        later = stream.turns.follows if stream.turns is not None else (None,) * stream.num_requests
        if self.images is not None:  # OpenAIOptions: chat only, single turns
            self._images = request_images(self.images, self._streams, stream.num_requests)
            self._streams += 1
        return [None if follows is not None else self.request_body(stream, i) for i, follows in enumerate(later)]

    def model_of(self, stream: StreamSpec, i: int) -> str:
        """What request i names as its `model`: its LoRA adapter, which vLLM serves as a model of its own, or the
        served model."""
        return stream.adapters[i] if stream.adapters else self.model

    def request_body(self, stream: StreamSpec, i: int) -> bytes:
        """Request i's token ids (or conversation), budget, sampling and seed, plus `extra_body`. In a multi-turn
        stream, vLLM is asked for the answer's token ids too: the next turn is sent with them; so is it where the
        answers are scored (`stream.answer_ids`)."""
        if self.endpoint == "responses":
            return self._responses_body(stream, i)
        if self.endpoint == "messages":
            return self._messages_body(stream, i)
        batch, s = stream.requests, stream.requests.sampling
        stream_options: Dict[str, Any] = {"include_usage": True}
        if self.continuous_usage_stats:
            stream_options["continuous_usage_stats"] = True
        max_tokens = batch.max_tokens[i]
        body: Dict[str, Any] = {"model": self.model_of(stream, i), "max_tokens": max_tokens, "stream": True,
                                "stream_options": stream_options, "temperature": s.temperature, "top_p": s.top_p}
        if self.endpoint == "chat":
            body["messages"] = [{"role": role, "content": content} for role, content in stream.chat_messages(i)]
            if self._images:
                last = max(k for k, m in enumerate(body["messages"]) if m["role"] == "user")
                body["messages"][last]["content"] = with_images(body["messages"][last]["content"], self._images[i])
        else:
            body["prompt"] = stream.prompt_ids(i)
            if stream.turns is not None and self.extensions == "vllm":
                body["return_token_ids"] = True
        if stream.answer_ids and self.extensions == "vllm":
            body["return_token_ids"] = True
        if batch.seeds:
            body["seed"] = batch.seeds[i]
        body.update(self._extension_fields(batch, max_tokens))
        body.update(self._schema_field(batch))
        body.update(self._tool_fields(batch))
        body.update(self.extra_body)
        return json.dumps(body).encode()

    def _responses_body(self, stream: StreamSpec, i: int) -> bytes:
        """OpenAI's Responses API: the conversation as `input` messages, `max_output_tokens`, and `store: false`
        (a stored response is kept by the server for later turns: a load test must not fill its memory). vLLM takes
        `ignore_eos`, `top_k` and `seed` here too; it has no `min_tokens` (ignore_eos alone forces the length)."""
        batch, s = stream.requests, stream.requests.sampling
        max_tokens = batch.max_tokens[i]
        conversation = [{"role": role, "content": content} for role, content in stream.chat_messages(i)]
        body: Dict[str, Any] = {"model": self.model_of(stream, i), "input": conversation,
                                "max_output_tokens": max_tokens, "stream": True, "store": False,
                                "temperature": s.temperature, "top_p": s.top_p}
        if batch.seeds:
            body["seed"] = batch.seeds[i]
        fields = self._extension_fields(batch, max_tokens)
        fields.pop("min_tokens", None)
        body.update(fields)
        body.update(self._schema_field(batch))
        body.update(self._tool_fields(batch))
        body.update(self.extra_body)
        return json.dumps(body).encode()

    def _messages_body(self, stream: StreamSpec, i: int) -> bytes:
        """Anthropic's Messages API: system messages as `system`, the rest as `messages`, `max_tokens`, and `top_k`,
        which the API has. It has no seed and no way to ask for exactly max_tokens tokens (vLLM's adapter keeps no
        extension either): a forced output length is only checked, as with extensions: none."""
        batch, s = stream.requests, stream.requests.sampling
        turns = stream.chat_messages(i)
        body: Dict[str, Any] = {"model": self.model_of(stream, i), "max_tokens": batch.max_tokens[i], "stream": True,
                                "messages": [{"role": role, "content": content} for role, content in turns
                                             if role != "system"],
                                "temperature": s.temperature, "top_p": s.top_p}
        system = "\n\n".join(content for role, content in turns if role == "system")
        if system:
            body["system"] = system
        if s.top_k > 0:
            body["top_k"] = s.top_k
        body.update(self._schema_field(batch))
        body.update(self._tool_fields(batch))
        body.update(self.extra_body)
        return json.dumps(body).encode()

    def _schema_field(self, batch: BatchSpec) -> Dict[str, Any]:
        """The answer schema in this API's own field (SCHEMA_FIELDS), where there is one and guided decoding is on."""
        if not (batch.answer_schema and self.guided_decoding):
            return {}
        schema = json.loads(batch.answer_schema)
        value = {"chat": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
                 "responses": {"format": {"type": "json_schema", "name": "answer", "schema": schema}},
                 "messages": {"format": {"type": "json_schema", "schema": schema}}}[self.endpoint]
        return {SCHEMA_FIELDS[self.endpoint]: value}

    def _tool_fields(self, batch: BatchSpec) -> Dict[str, Any]:
        """The workload's tools in this API's shape, every answer asked to call one (guided decoding: the server must
        call one, `required` or Anthropic's `any`, which vLLM enforces with a grammar; else `auto`: it may answer
        in text). One call per answer: an answer free to call again runs on to its budget."""
        if not batch.answer_tools:
            return {}
        tools, must = json.loads(batch.answer_tools), self.guided_decoding
        if self.endpoint == "chat":
            return {"tools": tools, "tool_choice": "required" if must else "auto", "parallel_tool_calls": False}
        functions = [tool["function"] for tool in tools]
        if self.endpoint == "responses":
            return {"tools": [{"type": "function", **f} for f in functions], "parallel_tool_calls": False,
                    "tool_choice": "required" if must else "auto"}
        shaped = [{"name": f["name"], "input_schema": f.get("parameters", EMPTY_PARAMETERS),
                   **{k: f[k] for k in ("description", "strict") if k in f}} for f in functions]
        return {"tools": shaped, "tool_choice": {"type": "any" if must else "auto", "disable_parallel_tool_use": True}}

    def _extension_fields(self, batch: BatchSpec, max_tokens: int) -> Dict[str, Any]:
        """Exactly max_tokens tokens (EOS off) and top_k, in the server's own words: OpenAI's API has neither."""
        s = batch.sampling
        fields: Dict[str, Any] = {}
        if self.extensions == "vllm":  # vLLM's and SGLang's extensions
            if s.top_k > 0:
                fields["top_k"] = s.top_k
            if batch.forced:
                fields.update(ignore_eos=True, min_tokens=max_tokens)
        elif self.extensions == "transformers":
            # transformers serve rejects unknown fields but takes a whole generation_config; with continuous
            # batching (--continuous-batching) eos_token_id -1 is its "no EOS", which plain generate() never meets
            # either. A given generation_config replaces the model's, so sampling must be asked for in it.
            config: Dict[str, Any] = {"do_sample": not s.greedy}
            if s.top_k > 0:
                config["top_k"] = s.top_k
            if batch.forced:
                config["eos_token_id"] = -1
            fields["generation_config"] = json.dumps(config)
        elif s.top_k > 0:
            raise RuntimeError(f"sampling.top_k {s.top_k} cannot be sent with extensions: none (OpenAI's API has "
                               "no top_k); set extensions to the server's, or top_k: 0")
        return fields

    async def _submit(self, session, bodies: List[Optional[bytes]], stream: StreamSpec, index: int) -> Submitted:
        import aiohttp

        try:
            if self.endpoint in pooling.POOLING_ENDPOINTS:
                return await self._pooled(session, bodies[index], stream, index)
            got = await self._exchange(session, bodies[index] or self.request_body(stream, index), stream.requests,
                                       index)
            sizes = tuple((image.width_px, image.height_px) for image in self._images[index]) if self._images else ()
            return replace(got, images=sizes)
        except asyncio.TimeoutError:
            limit = f"{self.request_timeout_s:g} s"
            raise RuntimeError(f"no complete response within request_timeout_s ({limit})") from None
        except aiohttp.ClientPayloadError as e:  # its own words name the transfer encoding, not what happened
            raise RuntimeError(f"the connection closed mid-response ({' '.join(str(e).split())})") from None

    def _refused(self, status: int, text: str) -> RuntimeError:
        """A request's error for an answer other than 200: its status and the start of what the server said."""
        return RuntimeError(f"HTTP {status} from {self.url}: {' '.join(text[:300].split())}")

    async def _pooled(self, session, body: Optional[bytes], stream: StreamSpec, index: int) -> Submitted:
        """Send embeddings or rerank request `index`; its answer comes whole, stamped when its last byte arrived."""
        assert body is not None  # request_bodies wrote every pooling request's
        async with session.post(self.url, data=body) as response:
            raw = await response.read()
            arrived_s = time.perf_counter()
            if response.status != 200:
                raise self._refused(response.status, raw.decode(errors="replace"))
        try:
            answer = json.loads(raw)
        except ValueError:
            raise RuntimeError(f"the answer is not JSON: {raw[:80]!r}") from None
        inputs = self.inputs_per_request
        tokens = pooling.read_answer(self.endpoint, answer, inputs)
        if tokens is None:
            tokens = pooling.harness_input_tokens(self.endpoint, stream, index, inputs)
        return Submitted(arrived_s, arrived_s, 0, input_tokens=tokens, output_tokens_source="none", inputs=inputs)

    async def _exchange(self, session, body: bytes, batch: BatchSpec, index: int) -> Submitted:
        """Send request `index`, stamp every chunk that carries tokens, return when the stream ends."""
        clock, reading, done = TokenClock(), READERS[self.endpoint](chat=self.endpoint == "chat"), False
        answer_s = None  # the answer's first token, after any reasoning
        async with session.post(self.url, data=body) as response:
            if response.status != 200:
                raise self._refused(response.status, await response.text())
            async with aclosing(sse_data(response.content)) as payloads:
                async for payload in payloads:
                    if payload == b"[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        raise RuntimeError(f"malformed SSE data (not JSON): {payload[:80]!r}") from None
                    clock.arrived(reading.read(chunk))
                    if reading.answered and answer_s is None:
                        answer_s = clock.last_s
        if not (done or reading.finished):
            raise RuntimeError("the connection closed before the response ended (no finish_reason, no data: [DONE])")
        output_tokens, source = reading.output_tokens(self.tokenizer)
        budget = batch.max_tokens[index]
        if batch.forced and output_tokens != budget:
            raise ShortOutputError(f"request {index} got {output_tokens} tokens (output_tokens_source: "
                                   f"{source}), asked for exactly {budget}")
        if clock.first_s is None:
            raise RuntimeError(f"request {index}: the stream carried no token")
        ids, text = reading.token_ids, "".join(reading.texts)
        valid = answer_valid(batch.answer_schema, text) if batch.answer_schema else None
        if batch.answer_tools:
            valid = calls_valid(batch.answer_tools, reading.tool_calls)
        return Submitted(clock.first_s, clock.last_s, output_tokens, clock.gaps_s(),
                         token_ids=tuple(ids) if len(ids) == output_tokens else None,
                         input_tokens=reading.usage_input_tokens, output_tokens_source=source,
                         cached_tokens=reading.usage_cached_tokens, text=text, answer_valid=valid,
                         reasoning_tokens=reading.reasoning_tokens,
                         # the answer's first token apart from the first token: only after streamed reasoning
                         first_answer_token_s=answer_s if reading.reasoning_tokens is not None else None)


async def sse_data(content) -> AsyncGenerator[bytes, None]:
    """The `data:` payloads of an SSE body (aiohttp's StreamReader), each as soon as its line is complete. Reads take
    whatever has arrived (`iter_any`) and split it here: aiohttp's own `readline` costs several Python calls a line,
    and a fast server's answer arrives in one read, so this is most of the client's CPU per request saved
    (`make client-capacity`). Blank separators, `: ping` comments and `event:` lines are skipped."""
    pending = b""
    async for data in content.iter_any():
        lines = (pending + data).split(b"\n")
        pending = lines.pop()  # an incomplete last line waits for the rest
        for raw in lines:
            line = raw.strip()
            if line.startswith(b"data:"):
                yield line[5:].strip()
    line = pending.strip()
    if line.startswith(b"data:"):  # a body that ends without a newline
        yield line[5:].strip()

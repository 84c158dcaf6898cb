"""The `openai` backend's HTTP client: a stream's requests as streamed `POST /v1/completions` calls with the prompt as
token ids, every SSE chunk that carries tokens stamped on arrival with the harness's clock.

Apart from backends/openai_compat/backend.py, which finds or starts the server and checks that it answers: sending and
timing need only its URL, so they read the same whoever started it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any, Dict, List

from harness.errors import ShortOutputError
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec, StreamTiming, Submitted, TokenClock, drive

# Body fields the harness sets from the sweep (prompt, budget, sampling, seed): extra_body may not change them.
HARNESS_FIELDS = ("model", "prompt", "max_tokens", "min_tokens", "ignore_eos", "stream", "stream_options",
                  "temperature", "top_p", "top_k", "seed", "n")


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

    async def serve(self, stream: StreamSpec) -> StreamTiming:
        import aiohttp

        bodies = self.request_bodies(stream.requests)  # serialized before the clock starts
        timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
        # limit=0: no connection pool cap, so max_concurrency (in `drive`) is the only one.
        connector = aiohttp.TCPConnector(limit=0)
        # read_bufsize: room for long SSE lines (a first chunk may echo the prompt's ids).
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=self.headers,
                                         read_bufsize=1 << 20) as session:
            return await drive(stream, partial(self._submit, session, bodies, stream.requests))

    def request_bodies(self, batch: BatchSpec) -> List[bytes]:
        """One JSON body per request: its token ids, budget, sampling and seed, plus `extra_body`."""
        s = batch.sampling
        stream_options: Dict[str, Any] = {"include_usage": True}
        if self.continuous_usage_stats:
            stream_options["continuous_usage_stats"] = True
        bodies = []
        for i, (prompt, max_tokens) in enumerate(zip(batch.prompts, batch.max_tokens)):
            body: Dict[str, Any] = {"model": self.model, "prompt": list(prompt), "max_tokens": max_tokens,
                                    "stream": True, "stream_options": stream_options,
                                    "temperature": s.temperature, "top_p": s.top_p}
            if s.top_k > 0:
                body["top_k"] = s.top_k  # not in OpenAI's API; vLLM, SGLang and TGI take it
            if batch.seeds:
                body["seed"] = batch.seeds[i]
            if batch.forced:
                # Exactly max_tokens: vLLM's and SGLang's extensions to the OpenAI API (EOS ignored, no early stop).
                body["ignore_eos"] = True
                body["min_tokens"] = max_tokens
            body.update(self.extra_body)
            bodies.append(json.dumps(body).encode())
        return bodies

    async def _submit(self, session, bodies: List[bytes], batch: BatchSpec, index: int) -> Submitted:
        """Send request `index`, stamp every chunk that carries tokens, return when the stream ends."""
        clock = TokenClock()
        counted, usage_tokens, token_ids, done = 0, None, [], False
        async with session.post(self.base_url + "/v1/completions", data=bodies[index]) as response:
            if response.status != 200:
                detail = " ".join((await response.text())[:300].split())
                raise RuntimeError(f"HTTP {response.status} from {self.base_url}/v1/completions: {detail}")
            async for raw in response.content:  # one SSE line at a time, as it arrives
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators, `: ping` comments, `event:` lines
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(payload)
                if chunk.get("error"):
                    raise RuntimeError(f"server error mid-stream: {chunk['error']}")
                usage = chunk.get("usage") or {}
                if usage.get("completion_tokens") is not None:
                    usage_tokens = int(usage["completion_tokens"])
                choices = chunk.get("choices")
                if not choices:
                    continue  # the final usage-only chunk: no token
                if usage.get("completion_tokens") is not None:
                    # continuous_usage_stats: the running completion count, so this chunk carries the difference
                    # (more than one when the server coalesces steps, 0 for a chunk that only ends the stream).
                    count = usage_tokens - counted
                else:
                    # No per-chunk usage: one token per chunk, as vLLM's serving benchmark counts; `text` may be
                    # empty (special tokens, or a UTF-8 character split over tokens) and still be a token.
                    count = 1
                clock.arrived(count)
                counted += max(count, 0)
                ids = choices[0].get("token_ids")  # vLLM with return_token_ids in extra_body
                if ids:
                    token_ids.extend(ids)
        if not done:
            raise RuntimeError("the stream ended before data: [DONE] (connection closed)")
        output_tokens = usage_tokens if usage_tokens is not None else counted
        budget = batch.max_tokens[index]
        if batch.forced and output_tokens != budget:
            raise ShortOutputError(f"request {index} got {output_tokens} tokens, asked for exactly {budget}")
        if clock.first_s is None:
            raise RuntimeError(f"request {index}: the stream carried no token")
        return Submitted(clock.first_s, clock.last_s, output_tokens, clock.gaps_s(),
                         token_ids=tuple(token_ids) if len(token_ids) == output_tokens else None)

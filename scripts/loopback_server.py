"""A loopback OpenAI-compatible completions server for the harness's own tests and benchmarks, not a server to
measure: it answers like vLLM (one token per SSE chunk with running usage, then a usage chunk and `data: [DONE]`)
after `--token-gap-ms` per token, and breaks the requests it is told to, the way real servers break.

- The fault server of tests/test_faults.py:
      python scripts/loopback_server.py --port 8000 --faults close,500,429,malformed,stall --every 3 --skip 2
- The load sink of benchmarks/client_capacity.py (answers at once, so that a client's own limits show):
      python scripts/loopback_server.py --port 8000 --token-gap-ms 0

Requests are numbered in the order they arrive (1, 2, ...); the first `--skip` (a sweep's warm-up) are always
answered, then every `--every`-th one gets the next fault of `--faults`, in turn:
- close: two tokens, then the connection is dropped mid-response;
- 500, 429: that status, no stream (429 with Retry-After);
- malformed: a token, then an SSE line that is not JSON;
- stall: a token, then nothing until the client gives up.
`--die-after N`: the process exits (code 3) when request N arrives, after sending it a token: a server that dies
mid-point.
`--max-running N`: at most N requests are answered at once, the rest wait their turn (a server of fixed capacity,
as an engine's max_num_seqs makes it: offered more than N / (tokens x gap) requests/s, its queue grows).
`--reasoning-tokens N`: POST /v1/chat/completions answers too, as vLLM does with a reasoning parser: the first N
tokens as `delta.reasoning_content`, the rest as `delta.content`, and OpenAI's
`usage.completion_tokens_details.reasoning_tokens` (which vLLM does not send) on the closing chunk.
`--reset-endpoint`: answers POST /reset_prefix_cache as vLLM's development mode does (`{"success": true}`; the first
`--refuse-resets` ones `{"success": false}`); without it that path is a 404. GET /stats says how many requests and
resets arrived; `--reset-log PATH` gets a line per reset: how many completions requests had arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from aiohttp import web



def chunk(index: int, usage: int, prompt_tokens: int, finish: bool = False, reasoning: int = -1) -> bytes:
    """Token `index` as a completions chunk, or (`reasoning` >= 0) as a chat chunk: reasoning while index <= it."""
    running = {"prompt_tokens": prompt_tokens, "completion_tokens": usage, "total_tokens": prompt_tokens + usage}
    if reasoning < 0:
        body = {"object": "text_completion", "model": "fault",
                "choices": [{"index": 0, "text": f" t{index}", "finish_reason": "length" if finish else None}],
                "usage": running}
    else:
        delta = {"reasoning_content" if index <= reasoning else "content": f" t{index}"}
        body = {"object": "chat.completion.chunk", "model": "fault",
                "choices": [{"index": 0, "delta": delta, "finish_reason": "length" if finish else None}],
                "usage": running}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class FaultServer:
    def __init__(self, faults, every: int, skip: int, die_after: int, token_gap_s: float):
        self.faults, self.every, self.skip, self.die_after = faults, every, skip, die_after
        self.token_gap_s = token_gap_s
        self.arrived = 0
        self.resets = 0  # POST /reset_prefix_cache answered, refused ones included
        self.refuse_resets = 0
        self.reset_log = ""
        self.running: asyncio.Semaphore | None = None  # --max-running: requests answered at once
        self.reasoning_tokens = -1  # --reasoning-tokens: chat answers start with this many reasoning tokens

    def fault_for(self, number: int):
        counted = number - self.skip
        if counted <= 0 or self.every <= 0 or not self.faults or counted % self.every:
            return None
        return self.faults[(counted // self.every - 1) % len(self.faults)]

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.arrived += 1
        number = self.arrived
        body = await request.json()
        fault = self.fault_for(number)
        if fault == "500":
            return web.Response(status=500, text="injected fault: internal server error")
        if fault == "429":
            return web.Response(status=429, text="injected fault: too many requests", headers={"Retry-After": "1"})
        if self.running is None:
            return await self._answer(request, body, number, fault)
        async with self.running:  # a request past the capacity waits here, as in an engine's queue
            return await self._answer(request, body, number, fault)

    async def _answer(self, request: web.Request, body: dict, number: int, fault) -> web.StreamResponse:
        chat = "messages" in body
        # a chat prompt's tokens counted as its words: the loopback has no tokenizer
        prompt = body["messages"] if chat else body.get("prompt") or []
        prompt_tokens = sum(len(m["content"].split()) for m in prompt) if chat else len(prompt)
        max_tokens = int(body.get("max_tokens") or 16)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(1, max_tokens + 1):
            if self.token_gap_s:
                await asyncio.sleep(self.token_gap_s)
            await response.write(chunk(i, i, prompt_tokens, finish=i == max_tokens,
                                       reasoning=self.reasoning_tokens if chat else -1))
            if number == self.die_after:
                os._exit(3)
            if fault == "close" and i == 2:
                request.transport.close()
                return response
            if fault == "malformed":
                await response.write(b"data: {not json\n\n")
            if fault == "stall":
                await asyncio.sleep(3600)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens}
        if chat:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(self.reasoning_tokens, max_tokens)}
        await response.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response


    async def reset_prefix_cache(self, _request: web.Request) -> web.Response:
        self.resets += 1
        if self.reset_log:
            with open(self.reset_log, "a") as log:
                log.write(f"{self.arrived}\n")
        return web.json_response({"success": self.resets > self.refuse_resets})

    async def stats(self, _request: web.Request) -> web.Response:
        return web.json_response({"requests": self.arrived, "resets": self.resets})


async def health(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def models(_request: web.Request) -> web.Response:
    return web.json_response({"data": [{"id": "fault"}]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--faults", default="", help="comma-separated: close, 500, 429, malformed, stall")
    parser.add_argument("--every", type=int, default=0)
    parser.add_argument("--skip", type=int, default=0)
    parser.add_argument("--die-after", type=int, default=0)
    parser.add_argument("--token-gap-ms", type=float, default=2.0, help="time before each token; 0: at once")
    parser.add_argument("--max-running", type=int, default=0, help="requests answered at once; 0: no limit")
    parser.add_argument("--reasoning-tokens", type=int, default=-1,
                        help="answer POST /v1/chat/completions, the first N tokens as reasoning; -1: no chat route")
    parser.add_argument("--reset-endpoint", action="store_true", help="answer POST /reset_prefix_cache")
    parser.add_argument("--refuse-resets", type=int, default=0, help="the first N resets answer success: false")
    parser.add_argument("--reset-log", default="", help="a file that gets a line per reset")
    args = parser.parse_args()
    server = FaultServer([f for f in args.faults.split(",") if f], args.every, args.skip, args.die_after,
                         args.token_gap_ms / 1e3)
    server.refuse_resets, server.reset_log = args.refuse_resets, args.reset_log
    server.reasoning_tokens = args.reasoning_tokens
    if args.max_running:
        server.running = asyncio.Semaphore(args.max_running)
    app = web.Application()
    app.add_routes([web.get("/health", health), web.get("/v1/models", models), web.get("/stats", server.stats),
                    web.post("/v1/completions", server.completions)])
    if args.reset_endpoint:
        app.add_routes([web.post("/reset_prefix_cache", server.reset_prefix_cache)])
    if args.reasoning_tokens >= 0:
        app.add_routes([web.post("/v1/chat/completions", server.completions)])
    # A stalled handler is dropped when its client gives up, and does not hold up SIGTERM.
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None, shutdown_timeout=1.0,
                handler_cancellation=True)


if __name__ == "__main__":
    main()

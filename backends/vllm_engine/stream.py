"""The `vllm` backend's `scenario: stream`: vLLM's async engine (`AsyncLLM`, the one its OpenAI server uses) on an
event loop of its own, handed each request of a stream at its scheduled time (`harness.scenarios.stream.drive`).

Apart from backends/vllm_engine/engine.py, whose offline engine (`vllm.LLM`) runs static batches: the two share the
engine arguments, the sampling parameters and the engine's own timestamps, not how requests reach the engine or
how it is shut down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from typing import Any, Dict, List, Sequence

from backends.vllm_engine.speculative import spec_totals
from harness.scenarios.stream import StreamSpec, StreamTiming, Submitted, TokenClock, run_stream

# How long the async engine's processes get to exit on their own at close(); vLLM's default is 5 s, and a CPU
# worker alone takes 3-4 s to wind down on 2 busy cores, so the engine core was often killed mid-teardown.
ENGINE_SHUTDOWN_TIMEOUT_S = 60.0


class AsyncEngine:
    """One AsyncLLM and the event loop it runs on, for every stream of a backend; `close()` ends both."""

    def __init__(self, engine_args: Dict[str, Any], adapters: Sequence[Any] = ()):
        """AsyncLLM with the same engine arguments, built on the loop every stream of this backend runs on.

        Built from inside that loop, so that its background tasks (the socket reader and the output handler,
        which feed each request's outputs) belong to it from the start. The engine core runs in its own
        process (V1 multiprocessing): generating holds neither this process's GIL nor its event loop.

        vLLM picks max_num_seqs and max_num_batched_tokens by usage context; AsyncLLM's default context
        (ENGINE_CONTEXT) falls back to SchedulerConfig's 128 sequences and 2,048 tokens on every platform,
        `vllm.LLM`'s (LLM_CLASS) to per-platform ones (CPU: 256 and 4,096; H100: 1,024 and 16,384). LLM_CLASS
        here too: a stream and a batch of one sweep run the same scheduler limits (`runtime_info` shows them;
        `vllm serve` would pick OPENAI_API_SERVER's, which engine_args can pin). `adapters`: LoRARequests loaded
        before it is used (`lora.load: start`).
        """
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(**engine_args)
        self.loop = asyncio.new_event_loop()
        self._request_ids = itertools.count()

        async def build():
            engine = AsyncLLM.from_engine_args(args, usage_context=UsageContext.LLM_CLASS)
            for adapter in adapters:  # LoRA adapters loaded at start, as vLLM's server loads its --lora-modules
                await engine.add_lora(adapter)
            return engine

        try:
            self.engine = self.loop.run_until_complete(build())
        except BaseException:
            self.loop.close()
            raise
        self.vllm_config = self.engine.vllm_config

    def serve(self, stream: StreamSpec, params: List[Any], speculating: bool,
              adapters: Dict[str, Any]) -> StreamTiming:
        """Each request goes to `AsyncLLM.generate` at its scheduled time (`harness.scenarios.stream.drive`) and is
        batched with whatever the engine is running (continuous batching).

        `params`: one SamplingParams per request, asking for delta outputs (RequestOutputKind.DELTA), so every
        engine step's new tokens are handed over as soon as they are made; a TokenClock stamps each hand-over
        (`token_gaps_s`: the gaps a client sees). `first_token_s`, `last_token_s` and `queued_s` are the engine's
        own per-request stamps (`RequestOutput.metrics`, filled because the harness sets disable_log_stats=False;
        the final delta's metrics object holds every stamp), as in `VLLMBackend.run`: they do not include the hop
        from the engine process back to this one.
        """
        from vllm.inputs import TokensPrompt

        engine, tag = self.engine, next(self._request_ids)

        async def submit(index: int) -> Submitted:
            sent_s = time.perf_counter()  # drive stamps sent_s just before this: no later than it
            prompt = TokensPrompt(prompt_token_ids=stream.prompt_ids(index))
            clock, ids, final = TokenClock(), [], None
            lora = adapters[stream.adapters[index]] if stream.adapters else None  # `adapters`: LoRARequests by name
            async for out in engine.generate(prompt, params[index], request_id=f"stream{tag}-{index}",
                                             lora_request=lora):
                new = out.outputs[0].token_ids
                clock.arrived(len(new))
                ids.extend(new)
                final = out
            if not ids:
                raise RuntimeError("vLLM returned no tokens")
            assert final is not None  # the outputs that carried those tokens
            m = final.metrics
            if m is None or not m.first_token_ts or not m.last_token_ts:
                raise RuntimeError("vLLM returned no per-request timestamps (RequestOutput.metrics is empty)")
            # The engine stamps in its own process with time.monotonic (VLLMBackend._check_same_clock): queued
            # after we sent the request, its last token before we received it, or the clocks disagree.
            if not sent_s <= m.queued_ts <= m.first_token_ts <= m.last_token_ts <= clock.last_s:
                raise RuntimeError("vLLM's timestamps fall outside the host's window around generate(): "
                                   "clock mismatch")
            queued_s = m.scheduled_ts - m.queued_ts if m.scheduled_ts and m.queued_ts else None
            return Submitted(m.first_token_ts, m.last_token_ts, output_tokens=len(ids),
                             token_gaps_s=clock.gaps_s(), queued_s=queued_s, token_ids=tuple(ids),
                             cached_tokens=final.num_cached_tokens)

        if not speculating:
            return run_stream(stream, submit, loop=self.loop)
        before = spec_totals()
        timing = run_stream(stream, submit, loop=self.loop)
        # The engine's output handler records a step's stats after handing its outputs over, possibly a turn of
        # the loop later than the last request saw its last token: let it run before reading the counters.
        self.loop.run_until_complete(asyncio.sleep(0.05))
        return dataclasses.replace(timing, spec=spec_totals() - before)

    def reset_prefix_cache(self) -> bool:
        """AsyncLLM.reset_prefix_cache on the engine's loop: False while blocks are still held."""
        return bool(self.loop.run_until_complete(self.engine.reset_prefix_cache()))

    def collective_rpc(self, method: str) -> List[Any]:
        """`vllm.LLM.collective_rpc` for the async engine: every worker's answer, awaited on this loop."""
        return self.loop.run_until_complete(self.engine.collective_rpc(method))

    def close(self) -> None:
        """Stop the engine process, then every task left on the loop, then the loop itself.

        `shutdown` runs inside the loop, so that vLLM closes its sockets and cancels its tasks there and then
        instead of scheduling that for a later turn of a loop that would never come.
        """
        engine, loop = self.engine, self.loop
        self.engine = None

        async def shut_down():
            engine.shutdown(timeout=ENGINE_SHUTDOWN_TIMEOUT_S)
            current = asyncio.current_task()
            left = [t for t in asyncio.all_tasks() if t is not current]
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)

        try:
            loop.run_until_complete(shut_down())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

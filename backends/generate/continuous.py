"""The `hf` backend's `batching: continuous`: transformers' own continuous-batching manager serving a stream.

The manager generates on its own thread; `harness.scenarios.stream.drive` adds each request to it at its scheduled
time, and its per-token outputs come back on an event loop this class keeps (docs/measurement.md,
"Request streams").
"""

from __future__ import annotations

import asyncio
import itertools
import time
from functools import partial
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec, Sampling
from harness.scenarios.stream import StreamSpec, StreamTiming, Submitted, run_stream

if TYPE_CHECKING:  # imported where used: planning reads this module without transformers
    from transformers.generation.continuous_batching import ContinuousBatchingManager

# Tokens per KV-cache page of the continuous-batching manager (transformers' default).
CB_PAGE_SIZE = 256
# Most tokens one continuous-batching step takes in (transformers' default); longer prefills are split over steps.
CB_MAX_BATCH_TOKENS = 8192


class ContinuousBatcher:
    """One manager at a time around a loaded model; `stop()` hands the model back to `generate`."""

    def __init__(self, net, max_batch_size: int, shape: SweepShape, eos_ids: List[int], pad_id: int):
        self.net, self.max_batch_size, self.shape = net, max_batch_size, shape
        self.eos_ids, self.pad_id = eos_ids, pad_id
        self._manager: Optional[ContinuousBatchingManager] = None
        self._manager_key: Optional[Tuple[bool, Sampling]] = None  # the forcing and sampling it was started for
        self._loop = asyncio.new_event_loop()
        self._stream_ids = itertools.count()

    def serve(self, stream: StreamSpec) -> StreamTiming:
        """Continuous batching: transformers' `ContinuousBatchingManager` generates on its own thread, and
        `harness.scenarios.stream.drive` adds each request to it at its scheduled time (`add_request`, streaming).

        The manager schedules every step itself (FIFO: decoding requests first, then waiting prompts, at most
        max_batch_size requests and max_batch_tokens tokens per step, prompts split over steps beyond that).
        A request's output comes back on this backend's event loop once, when it finishes (`register_result_handler`,
        not streamed: a token-by-token hand-over woke the event loop every step and cost 2-6% of the manager's own
        loop, docs/measurement.md). Every timing is the manager's own per-token stamps (`record_timestamps`:
        time.perf_counter, the clock of every other stamp, read in its thread as it records each token on the host):
        `first_token_s`, `last_token_s`, and `token_gaps_s` (the gaps between consecutive stamps: when the engine had
        each token, not when a client would have received it); `queued_s`: the manager's own wait, from
        `add_request` until it scheduled the request.

        Forced lengths: the manager has no min_new_tokens (it drops that processor), so a forced request gets no EOS
        to stop on and EOS is suppressed at every step (`suppress_tokens`), which is what generate's
        min_new_tokens == max_new_tokens does. Sampling: one generator for the whole manager, seeded with the
        stream's first seed; which draw a request gets depends on the steps it shares, so per-request seeds do not
        hold and sampled tokens do not repeat run to run.
        """
        requests = stream.requests
        self._check_fits(requests)
        manager = self._manager_for(requests)
        eos = [] if requests.forced else list(self.eos_ids)
        tag = next(self._stream_ids)
        return run_stream(stream, partial(self._submit, manager, stream, eos, tag), loop=self._loop)

    def _check_fits(self, requests: BatchSpec) -> None:
        """Refuse a stream with a request longer than the manager's KV cache before its clock starts."""
        capacity = self.sizes()["num_blocks"] * CB_PAGE_SIZE
        longest = max(len(p) + n for p, n in zip(requests.prompts, requests.max_tokens))
        if longest > capacity:
            raise RuntimeError(f"a request of {longest} tokens does not fit the manager's KV cache ({capacity} tokens, "
                               f"sized for the sweep's longest request)")

    async def _submit(self, manager, stream: StreamSpec, eos: List[int], tag: int, index: int) -> Submitted:
        """Add request `index` of stream `tag` to the running manager and wait for its last token: `drive`'s submit."""
        sent_s = time.perf_counter()  # drive stamps sent_s just before this: no later than it
        request_id = f"stream{tag}-{index}"
        done = asyncio.get_running_loop().create_future()

        def on_output(output) -> None:  # on the event loop, once: the request finished (not streamed)
            if output.is_finished() and not done.done():
                done.set_result((output, time.perf_counter()))

        manager.register_result_handler(request_id, on_output)
        added = manager.add_request(stream.prompt_ids(index), request_id=request_id,
                                    max_new_tokens=stream.requests.max_tokens[index], streaming=False,
                                    record_timestamps=True, eos_token_id=eos)
        if added is None:
            with manager.output_router._lock:
                manager.output_router.result_handlers.pop(request_id, None)
            raise RuntimeError(f"the continuous-batching manager refused the request ({_manager_state(manager)})")
        output, received_s = await done
        return _submitted(output, sent_s, received_s)

    def sizes(self) -> Dict[str, int]:
        """The manager's limits: max_batch_size requests per step, and a KV cache that holds that many of the
        sweep's longest requests (pages are per request: one partly filled page each on top). Steps take up to
        max_batch_size prompts at once, at most CB_MAX_BATCH_TOKENS tokens."""
        return cb_sizes(self.max_batch_size, self.shape.max_input_length, self.shape.max_tokens)

    def _manager_for(self, requests: BatchSpec):
        """The running manager for this stream's sampling and forcing, started (and its KV cache built) before the
        stream's clock starts. One manager serves every stream of a sweep; another sampling or forcing replaces it."""
        import torch

        key = (requests.forced, requests.sampling)
        if self._manager is not None and self._manager_key != key:
            self.stop()
        if self._manager is None:
            from transformers import GenerationConfig
            from transformers.generation.configuration_utils import ContinuousBatchingConfig

            s = requests.sampling
            sampling = {} if s.greedy else dict(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
            config = GenerationConfig(
                max_new_tokens=requests.max_output_tokens, do_sample=not s.greedy, num_beams=1,
                eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
                suppress_tokens=list(self.eos_ids) if requests.forced else None, **sampling)
            sizes = self.sizes()
            cb = ContinuousBatchingConfig(
                page_size=CB_PAGE_SIZE, num_blocks=sizes["num_blocks"], max_batch_tokens=sizes["max_batch_tokens"],
                max_requests_per_batch=sizes["max_requests_per_batch"],
                allow_block_sharing=False,  # no prefix cache: every prompt is prefilled, as with vLLM's default here
                safety_margin=0.0,  # the cache is sized for max_batch_size requests: admit up to it
                auto_switch_to_flash=False,  # attn_implementation means the same as in generate
                seed=requests.seeds[0] if requests.seeds else 0)
            self._manager = self.net.init_continuous_batching(generation_config=config, continuous_batching_config=cb)
            self._manager_key = key
            self._manager.start()
            while self._manager.batch_processor is None:  # its thread builds the KV cache first
                if not self._manager.is_running():
                    error = self._manager.background_thread_status.fatal_error
                    self.stop()
                    if error is not None:
                        raise error
                    raise RuntimeError("the continuous-batching manager stopped while starting")
                time.sleep(0.001)
        if not requests.sampling.greedy and requests.seeds:
            torch.manual_seed(requests.seeds[0])  # the manager's thread is idle between streams
        return self._manager

    def stop(self) -> None:
        """Stop the continuous-batching manager's thread and free its KV cache (the model gets its attention back)."""
        manager = self._manager
        if manager is None:
            return
        self._manager = None
        manager.stop(block=True, timeout=60, hard_stop=True)  # idle between streams; after a failure, drop the rest
        manager.destroy()

    def close(self) -> None:
        self.stop()
        self._loop.close()


def cb_sizes(max_batch_size: int, longest_input: int, longest_request: int) -> Dict[str, int]:
    """The continuous-batching manager's limits (`ContinuousBatcher.sizes`)."""
    n = max_batch_size
    return {"max_requests_per_batch": n,
            "num_blocks": -(-n * max(1, longest_request) // CB_PAGE_SIZE) + n,
            "max_batch_tokens": max(n, min(CB_MAX_BATCH_TOKENS, n * max(1, longest_input)))}


def _submitted(output, sent_s: float, received_s: float) -> Submitted:
    """A finished request's timing, from the manager's own per-token stamps, checked against the window in which this
    side sent the request (`sent_s`) and received its output (`received_s`)."""
    if output.error:
        raise RuntimeError(output.error)
    stamps = output.timestamps or ()
    if len(stamps) != len(output.generated_tokens) or not stamps:
        raise RuntimeError(f"the manager stamped {len(stamps)} of {len(output.generated_tokens)} tokens")
    if not sent_s <= output.created_time <= output.lifespan[0] <= stamps[0] <= stamps[-1] <= received_s:
        raise RuntimeError("the manager's timestamps fall outside the request's window: clock mismatch")
    return Submitted(stamps[0], stamps[-1], output_tokens=len(output.generated_tokens),
                     token_gaps_s=tuple(b - a for a, b in zip(stamps, stamps[1:])),
                     queued_s=output.lifespan[0] - output.created_time, token_ids=tuple(output.generated_tokens))


def _manager_state(manager) -> str:
    return manager.background_thread_status.can_accept_new_requests() or "reason unknown"

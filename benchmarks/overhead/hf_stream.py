"""hf continuous stream: `HFBackend.serve` (batching: continuous) against transformers' continuous-batching manager
driven as its own `generate_batch` drives it, on the same running manager, the same requests all at once.

The model is the tiny preset (random weights, fp32, sdpa) in an `hf` entry with `batching: continuous` and
max_batch_size the largest N asked for, so that every request of a stream runs in the same steps. One pair is one
set of N requests, every one arriving at time 0 (a `burst` stream), run once by each side:

- harness: `backend.serve(stream)` (backends/generate/continuous.py: `drive` adds each request to the manager with its
  own result handler, streaming every token back to the harness's event loop); the figure is the stream's makespan
  as the harness records it, StreamTiming.end_s - start_s (time zero, when every request is due, until the last
  request's last token has come back).
- bare: the loop of transformers' `generate_batch` (generation/continuous_batching/continuous_api.py) on the very
  manager the backend started, with its generation config (greedy, EOS suppressed for the forced length, the same
  max_new_tokens) and its KV cache and batch limits: `manager.add_requests(inputs, max_new_tokens)`, then
  `manager.get_result` until every request is finished, timed with perf_counter from `add_requests` on. Before
  its clock starts it does what the harness does before its time zero, untimed: a gc.collect and a LEAD_S pause
  (harness/scenarios/stream.py, paused_gc and drive), because on this CPU machine an engine that has sat idle for
  more than ~50 ms runs its next prefill up to 1.6x slower, and the harness's streams always start so.
  `generate_batch` itself is not timed because every call builds, starts and stops a manager (its stop waits up to
  100 ms for the idle thread to wake), which the harness does once per sweep, not per stream; one call of it at the
  end checks that it produces the same tokens.

Prompts are a fresh draw of the random workload per pair, the same for both sides of a pair. Both sides must give
every request exactly the output length, and greedy, the same token ids. --batch-sizes gives N, the number of
requests per stream (and the backend's max_batch_size is the largest N).

    python benchmarks/overhead/hf_stream.py [--pairs 30] [--batch-sizes 1 8 16] [--input-length 128]
                                            [--output-length 32]
"""

from __future__ import annotations

import gc
import time
from typing import List, Tuple

from pairs import Tokens, alternate, arguments, check_tokens, emit, figure, served

from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import LEAD_S, StreamSpec

from inputs import burst

PATH = "hf continuous stream"
BARE = "the backend's own CB manager: add_requests + get_result (generate_batch's loop)"
NOTE = ("one pair: N requests all arriving at 0 through each side; ms: makespan, time zero to the last request's "
        "last token (harness: StreamTiming.end_s - start_s); 'batch N' is the number of requests N; bare starts "
        "after the harness's untimed gc.collect + LEAD_S")
RESULT_WAIT_S = 60.0  # a request not done in this long means the manager is stuck, not slow



def manager_of(backend):
    """The continuous-batching manager the backend runs its streams on, started by a first `serve`; reached through
    the backend's private attributes because the bare side must drive this very manager (its KV cache and config)."""
    manager = backend._continuous._manager
    if manager is None or not manager.is_running():
        raise SystemExit("the backend's continuous-batching manager is not running")
    return manager


def bare_batch(manager, requests: BatchSpec) -> Tuple[float, List[Tuple[int, ...]]]:
    """generate_batch's main loop on a running manager: (ms from submission to the last finished result, the
    generated ids of each request in submission order)."""
    inputs = [list(p) for p in requests.prompts]
    # The harness's stream starts after paused_gc's collect and drive's LEAD_S, with the engine idle all that while;
    # on this CPU machine an engine idle for more than ~50 ms runs its first step up to 1.6x slower (its prefill
    # loses the second thread), so the bare batch starts from the same idle engine.
    gc.collect()
    time.sleep(LEAD_S)
    start = time.perf_counter()
    ids = manager.add_requests(inputs=inputs, max_new_tokens=requests.max_output_tokens)
    done = {}
    while len(done) < len(ids):
        out = manager.get_result(timeout=RESULT_WAIT_S)
        if out is None:
            raise SystemExit(f"the manager returned {len(done)} of {len(ids)} requests")
        if out.is_finished():
            done[out.request_id] = out
    elapsed_ms = (time.perf_counter() - start) * 1e3
    failed = [o.error for o in done.values() if o.error]
    if failed:
        raise SystemExit(f"bare request failed: {failed[0]}")
    return elapsed_ms, [tuple(done[r].generated_tokens) for r in ids]


def sides(backend, stream_of, tokens: Tokens):
    """The two timed callables of one shape; each records every request's generated ids in `tokens`."""
    def harness(i: int) -> float:
        timing = served(backend.serve(stream_of(i)))
        tokens["harness", i] = [tuple(r.token_ids) for r in timing.requests]
        return (timing.end_s - timing.start_s) * 1e3

    def bare(i: int) -> float:
        elapsed_ms, ids = bare_batch(manager_of(backend), stream_of(i).requests)
        tokens["bare", i] = ids
        return elapsed_ms

    return harness, bare


def check_generate_batch(backend, stream: StreamSpec) -> None:
    """transformers' `generate_batch` itself, with the manager's configs, gives the harness's tokens (run once, after
    the backend's manager is stopped: one manager on the model at a time)."""
    manager = manager_of(backend)
    expected = [tuple(r.token_ids) for r in backend.serve(stream).requests]
    gen_config, cb_config = manager.generation_config, manager.continuous_batching_config
    backend._continuous.stop()
    out = backend.net.generate_batch(inputs=[list(p) for p in stream.requests.prompts], generation_config=gen_config,
                                     continuous_batching_config=cb_config)
    got = [tuple(o.generated_tokens) for o in out.values()]
    if got != expected:
        raise SystemExit("generate_batch's tokens differ from the harness's")


def measure(backend, args) -> None:
    """One figure per N; the first serve starts the manager (and builds its KV cache) before any pair."""
    for n in args.batch_sizes:
        def stream_of(i: int, n=n) -> StreamSpec:
            return burst(backend.model, n, args.input_length, args.output_length, i)

        backend.serve(stream_of(0))
        tokens: Tokens = {}
        ours, theirs = alternate(*sides(backend, stream_of, tokens), args.pairs)
        check_tokens(tokens, n, args.output_length)
        shape = f"batch {n}, input {args.input_length}, output {args.output_length}"
        emit(figure(PATH, BARE, shape, ours, theirs, note=NOTE))


def main() -> None:
    args = arguments(__doc__.splitlines()[0], batch_sizes=(1, 8, 16), pairs=30)
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    n_max = max(args.batch_sizes)
    options = HFOptions(name="hf", device="cpu", batching="continuous", max_batch_size=n_max)
    options.validate("backends.0")
    backend = HFBackend(options, model, SweepShape(n_max, args.input_length, args.output_length, scenario="stream"))
    backend.load()
    try:
        measure(backend, args)
        check_generate_batch(backend, burst(model, n_max, args.input_length, args.output_length, 0))
    finally:
        backend.close()


if __name__ == "__main__":
    main()

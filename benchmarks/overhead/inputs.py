"""The inputs of pair `index`: the random workload's prompts (a fresh draw per pair, as a sweep draws its batches),
the same for both sides of the pair, as a batch or as a stream on one fixed schedule."""

from __future__ import annotations

import pairs  # first: it puts the repo root on sys.path

from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec, Sampling
from harness.scenarios.stream import StreamSpec
from workloads.random_ids import allowed_token_ids, make_prompts

SCHEDULE_SEED = 0  # one schedule for every pair of a stream shape: only the prompts change from pair to pair


def batch(model, batch_size: int, input_length: int, output_length: int, index: int,
          sampling: Sampling = Sampling(), seeds=()) -> BatchSpec:
    allowed = allowed_token_ids(model.hf_config.vocab_size, model.special_token_ids)
    prompts = make_prompts(allowed, 0, batch_size, input_length, output_length, "timed", index)
    return BatchSpec(prompts, (output_length,) * batch_size, sampling=sampling, seeds=seeds)


def poisson_stream(model, n: int, input_length: int, output_length: int, rate: float, index: int) -> StreamSpec:
    """N requests at Poisson arrivals of `rate`/s."""
    return StreamSpec(batch(model, n, input_length, output_length, index),
                      arrival_times("poisson", rate, n, SCHEDULE_SEED))


def burst(model, n: int, input_length: int, output_length: int, index: int) -> StreamSpec:
    """N requests, every one due at time 0."""
    return StreamSpec(batch(model, n, input_length, output_length, index), arrival_times("burst", 0.0, n, 0))


def measure_poisson_streams(path: str, bare: str, model, args, sides, check, note: str = "") -> None:
    """One figure per stream size N (`--batch-sizes`) at `--rate`: `sides(stream_of, tokens)` gives the two timed
    callables of a shape, each recording its requests' outputs in `tokens`; `check(tokens, n, output_length)` then
    holds both sides to the same work. A pair is one stream through each side; ms: its mean end-to-end latency."""
    inp, out = args.input_length, args.output_length
    for n in args.batch_sizes:
        tokens: pairs.Tokens = {}
        ours, theirs = pairs.alternate(*sides(lambda i, n=n: poisson_stream(model, n, inp, out, args.rate, i), tokens),
                                       args.pairs)
        check(tokens, n, out)
        shape = f"stream {n}, Poisson {args.rate:g}/s, input {inp}, output {out}"
        said = (f"a pair: one stream of {n} requests (--batch-sizes is N); ms: mean e2e, scheduled arrival to last "
                "token" + (f"; {note}" if note else ""))
        pairs.emit(pairs.figure(path, bare, shape, ours, theirs, note=said))

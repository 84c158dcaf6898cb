"""`scenario: stream` on the HF backend: static batching (the harness's own scheduler around `generate`) and
continuous batching (transformers' manager), on the real tiny model."""

from collections import defaultdict

import numpy as np
import pytest

from backends.generate.accelerate_pp import AccelerateBackend, AccelerateOptions
from backends.generate.deepspeed_tp import DeepSpeedBackend, DeepSpeedOptions
from backends.generate.hf import HFBackend, HFOptions
from harness.errors import UserError
from harness.plan.points import SweepShape
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec

MAX_BATCH = 4
MAX_WAIT_MS = 50.0
OUT = 6


def make_backend(model, batching):
    options = HFOptions(name="hf", device="cpu", batching=batching, max_batch_size=MAX_BATCH, max_wait_ms=MAX_WAIT_MS)
    options.validate("backends.0")
    b = HFBackend(options, model, SweepShape(0, 40, OUT, scenario="stream"))
    b.load()
    return b


@pytest.fixture(scope="module")
def static(model):
    b = make_backend(model, "static")
    yield b
    b.close()


@pytest.fixture(scope="module")
def continuous(model):
    b = make_backend(model, "continuous")
    yield b
    b.close()


def prompts(model, n, seed=0):
    """Mixed lengths (8..40), random ids below the vocabulary size, never a special id (0-2)."""
    rng = np.random.default_rng(seed)
    vocab = model.hf_config.vocab_size
    assert set(model.special_token_ids) <= {0, 1, 2}
    return [rng.integers(3, vocab, size=int(length)).tolist() for length in rng.integers(8, 41, size=n)]


def stream(model, n, arrival, rate, forced=True, seed=0):
    return StreamSpec(BatchSpec(prompts(model, n, seed), (OUT,) * n, forced=forced), arrival_times(arrival, rate, n, 0))


@pytest.fixture(scope="module")
def mixed(model):
    """Ten requests, Poisson arrivals at 100/s: each one lasts several decode steps, so they overlap."""
    return stream(model, 10, "poisson", 100.0)


@pytest.fixture(scope="module")
def served(static, continuous, mixed):
    """The mixed stream through each mode, each after a warm-up run of the same stream."""
    out = {}
    for name, backend in (("static", static), ("continuous", continuous)):
        backend.serve(mixed)
        out[name] = backend.serve(mixed)
    return out


def check_stream(timing, spec):
    assert [r.index for r in timing.requests] == list(range(spec.num_requests))
    for r, prompt, budget in zip(timing.requests, spec.requests.prompts, spec.requests.max_tokens):
        assert r.ok, r.error
        assert r.output_tokens == budget and len(r.token_ids) == budget
        assert r.input_tokens == len(prompt)
        assert r.scheduled_s <= r.dispatched_s <= r.sent_s <= r.first_token_s <= r.last_token_s <= timing.end_s
        assert timing.start_s <= r.scheduled_s
        assert len(r.token_gaps_s) == budget - 1 and all(g >= 0 for g in r.token_gaps_s)
        assert r.queued_s is not None and r.queued_s >= 0


def batches(timing):
    """Static batching: the requests of one `generate` share its start."""
    groups = defaultdict(list)
    for r in timing.requests:
        groups[r.sent_s].append(r.index)
    return sorted(groups.values())


@pytest.mark.engine
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_every_request_comes_back_forced_and_in_time_order(served, mixed, mode):
    timing = served[mode]
    check_stream(timing, mixed)
    scheduled = [r.scheduled_s - timing.start_s for r in timing.requests]
    assert scheduled == pytest.approx(mixed.arrivals_s, abs=1e-9)


def check_batch_starts(timing):
    """A static batch starts full, or once its oldest request has waited max_wait_ms, or once no more requests
    will come (the last one is due)."""
    rs, last_due = timing.requests, timing.requests[-1].scheduled_s
    for g in batches(timing):
        oldest = rs[g[0]]
        assert len(g) == MAX_BATCH or oldest.sent_s - oldest.scheduled_s >= MAX_WAIT_MS / 1e3 or \
            oldest.sent_s >= last_due


def test_static_batches_never_exceed_max_batch_size(served):
    timing = served["static"]
    groups = batches(timing)
    assert all(1 <= len(g) <= MAX_BATCH for g in groups)
    check_batch_starts(timing)
    assert sorted(i for g in groups for i in g) == list(range(10))
    for g in groups:  # one generate: every sequence's first token in the same step, the batch's oldest first
        assert len({timing.requests[i].first_token_s for i in g}) == 1
        assert g == list(range(g[0], g[0] + len(g)))
    # A request that fell due while a batch generated was queued by the server: its clock started on time.
    rs = timing.requests
    busy = [(rs[g[0]].sent_s, max(rs[i].last_token_s for i in g)) for g in groups]
    during = [r for r in rs if any(start < r.scheduled_s < end for start, end in busy)]
    assert during  # at 100 requests/s some always do
    assert all(r.dispatched_s == r.scheduled_s for r in during)


def test_static_lone_requests_wait_max_wait_ms(static, model):
    """Sparse arrivals (2/s): a request that finds the engine idle is a batch of one, started when it has waited
    max_wait_ms for company, except the last one, which starts at once: no more requests will come."""
    spec = stream(model, 3, "constant", 2.0, seed=1)
    timing = static.serve(spec)
    check_stream(timing, spec)
    check_batch_starts(timing)
    rs = timing.requests
    # Found the engine idle: due well after the previous request's generate ended (its last token, plus its tail).
    idle = [rs[0]] + [r for prev, r in zip(rs, rs[1:]) if r.scheduled_s > prev.last_token_s + 0.05]
    assert rs[0] in idle and [rs[0].index] in batches(timing)  # nothing else arrives within max_wait_ms of it
    for r in idle:
        assert [r.index] in batches(timing)
        assert r.dispatched_s > r.scheduled_s  # the loop woke up for it: this is the send slip
        assert r.queued_s == pytest.approx(r.sent_s - r.scheduled_s)
        if r is rs[-1]:
            assert r.sent_s - r.dispatched_s < MAX_WAIT_MS / 1e3 * 0.9
        else:
            assert r.sent_s - r.scheduled_s >= MAX_WAIT_MS / 1e3


def test_static_burst_runs_as_full_batches(static, model):
    """2 * max_batch_size requests at once: two batches of max_batch_size, the second waiting in the queue for the
    first to finish. The loop saw all of them due at the same wake-up."""
    spec = stream(model, 2 * MAX_BATCH, "burst", 1.0, seed=2)
    timing = static.serve(spec)
    check_stream(timing, spec)
    first, second = batches(timing)
    assert first == list(range(MAX_BATCH)) and second == list(range(MAX_BATCH, 2 * MAX_BATCH))
    a, b = timing.requests[0], timing.requests[MAX_BATCH]
    assert b.sent_s >= a.last_token_s
    assert len({r.dispatched_s for r in timing.requests}) == 1


def test_static_batch_is_capped_by_max_concurrency(static, model):
    spec = stream(model, 6, "burst", 1.0, seed=3)
    timing = static.serve(StreamSpec(spec.requests, spec.arrivals_s, max_concurrency=2))
    check_stream(timing, spec)
    assert batches(timing) == [[0, 1], [2, 3], [4, 5]]


def test_continuous_requests_join_running_batch(served):
    """A request that arrives while others decode gets its first token before an earlier one's last: it joined
    the running batch instead of waiting for it to finish."""
    rs = served["continuous"].requests
    joined = [(i, j) for i in range(len(rs)) for j in range(i + 1, len(rs))
              if rs[i].first_token_s < rs[j].first_token_s < rs[i].last_token_s]
    assert joined
    # Never more than max_batch_size requests between their first and last token at once.
    for r in rs:
        assert sum(o.first_token_s <= r.first_token_s <= o.last_token_s for o in rs) <= MAX_BATCH


def test_greedy_tokens_match_across_modes_and_plain_generate(served, static, mixed):
    plain = static.run(mixed.requests).token_ids
    assert [r.token_ids for r in served["static"].requests] == list(plain)
    assert [r.token_ids for r in served["continuous"].requests] == list(plain)


def eos_on_top(backend):
    """Make EOS the top logit at every step (a forward hook on the LM head)."""
    import torch

    eos = backend.eos_ids[0]
    return backend.net.lm_head.register_forward_hook(lambda module, args, out: out.index_add(
        -1, torch.tensor([eos]), torch.full((*out.shape[:-1], 1), 1e4)))


@pytest.mark.engine
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_forced_lengths_suppress_eos_and_unforced_stop_at_it(request, model, mode):
    backend = request.getfixturevalue(mode)
    eos = backend.eos_ids[0]
    forced, free = stream(model, 3, "burst", 1.0, seed=4), stream(model, 3, "burst", 1.0, forced=False, seed=4)
    hook = eos_on_top(backend)
    try:
        got_forced, got_free = backend.serve(forced), backend.serve(free)
    finally:
        hook.remove()
    check_stream(got_forced, forced)
    assert all(eos not in r.token_ids for r in got_forced.requests)
    assert [(r.ok, r.output_tokens, r.token_ids) for r in got_free.requests] == [(True, 1, (eos,))] * 3


def test_runtime_info_reports_the_batching(static, continuous):
    assert {k: static.runtime_info()[k] for k in ("batching", "max_batch_size", "max_wait_ms")} == {
        "batching": "static", "max_batch_size": MAX_BATCH, "max_wait_ms": MAX_WAIT_MS}
    info = continuous.runtime_info()
    assert info["batching"] == "continuous" and info["max_requests_per_batch"] == MAX_BATCH
    assert info["kv_cache_capacity_tokens"] >= MAX_BATCH * (40 + OUT)


def test_options_scenarios_and_limits():
    assert HFBackend.scenarios == ("batch", "stream")
    assert AccelerateBackend.scenarios == ("batch",) and DeepSpeedBackend.scenarios == ("batch",)
    cont = HFOptions(name="hf", batching="continuous", max_batch_size=16)
    assert "scenario: stream" in HFBackend.unsupported(cont, "batch", None)
    assert HFBackend.unsupported(cont, "stream", None) is None
    assert HFBackend.unsupported(HFOptions(name="hf"), "batch", None) is None
    assert HFBackend.stream_batch_limit(cont) == 16
    assert AccelerateBackend.unsupported(AccelerateOptions(name="accelerate"), "stream", None) is not None
    assert DeepSpeedBackend.unsupported(DeepSpeedOptions(name="deepspeed"), "stream", None) is not None
    assert AccelerateBackend.stream_batch_limit(AccelerateOptions(name="accelerate")) is None


def test_continuous_memory_estimate_covers_the_paged_cache(model):
    """The manager's cache holds max_batch_size requests in whole pages, whatever the point's cap."""
    static = HFBackend.estimate_memory(HFOptions(name="hf", max_batch_size=8), model, 2, 100, 20)
    paged = HFBackend.estimate_memory(HFOptions(name="hf", batching="continuous", max_batch_size=8), model, 2, 100, 20)
    assert paged.weights_bytes == static.weights_bytes
    assert paged.kv_cache_bytes >= static.kv_cache_bytes * 8 // 2 and paged.activation_bytes > static.activation_bytes


@pytest.mark.parametrize("fields,named", [
    (dict(batching="dynamic"), "b.batching"),
    (dict(max_batch_size=0), "b.max_batch_size"),
    (dict(max_wait_ms=-1.0), "b.max_wait_ms"),
    (dict(batching="continuous", attn_implementation="flex_attention"), "b.attn_implementation"),
    (dict(batching="continuous", cache_implementation="static"), "b.batching"),
])
def test_bad_stream_options_are_user_errors(fields, named):
    with pytest.raises(UserError, match=named):
        HFOptions(name="hf", **fields).validate("b")


@pytest.mark.engine
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_sampled_streams(request, model, mode):
    """Sampling runs in both modes; static batches repeat with the same seeds (one generate per batch, seeded
    by its first request), the manager's shared generator makes no such promise."""
    from harness.scenarios.batch import Sampling

    backend = request.getfixturevalue(mode)
    base = stream(model, 4, "burst", 1.0, seed=5)
    hot = BatchSpec(base.requests.prompts, base.requests.max_tokens, sampling=Sampling(temperature=1.0, top_p=0.9),
                    seeds=(11, 12, 13, 14))
    spec = StreamSpec(hot, base.arrivals_s)
    a, b = backend.serve(spec), backend.serve(spec)
    check_stream(a, spec)
    check_stream(b, spec)
    greedy = [r.token_ids for r in backend.serve(base).requests]
    assert [r.token_ids for r in a.requests] != greedy
    if mode == "static":
        assert [r.token_ids for r in a.requests] == [r.token_ids for r in b.requests]

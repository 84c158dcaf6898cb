"""The HF backend's timing and length checks, on the real tiny model."""

import pytest

from backends.generate.base import StepClock, tokens_produced
from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.batch import BatchSpec, Sampling
from workloads.random_ids import allowed_token_ids, make_prompts


def test_step_clock_skips_the_prompt_and_stamps_each_step():
    import torch

    synced = []
    clock = StepClock(lambda: synced.append(1))
    clock.put(torch.zeros(4, 16, dtype=torch.long))  # the prompts
    for _ in range(5):
        clock.put(torch.zeros(4, dtype=torch.long))  # a step: one token for each of 4 sequences
    clock.end()
    assert len(clock.stamps) == 5 and len(synced) == 5
    assert clock.stamps == sorted(clock.stamps)


def test_step_clock_gives_every_token_of_a_verifying_pass_its_stamp():
    """Assisted generation hands over a pass's accepted tokens plus its own as one (1, n) tensor."""
    import torch

    clock = StepClock(lambda: None)
    clock.put(torch.zeros(1, 16, dtype=torch.long))
    for n in (3, 1, 5):
        clock.put(torch.zeros(1, n, dtype=torch.long))
    assert len(clock.stamps) == 9  # stamps[k]: token k + 1
    assert len(set(clock.stamps[:3])) == 1 and len(set(clock.stamps[4:])) == 1


def test_tokens_produced_counts_up_to_first_eos():
    assert tokens_produced([[5, 6, 7, 8], [5, 2, 2, 2], [5, 6, 7, 2]], eos_ids=[2], budgets=[4, 4, 4]) == (4, 2, 4)
    assert tokens_produced([[5, 6, 7, 8], [5, 6, 2, 2]], eos_ids=[2], budgets=[2, 4]) == (2, 3)


@pytest.fixture(scope="module")
def backend():
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    b = HFBackend(HFOptions(name="hf", device="cpu"), model, SweepShape(16, 512, 64))
    b.load()
    yield b
    b.close()


def batch(model, bs, n, out):
    allowed = allowed_token_ids(model.hf_config.vocab_size, model.special_token_ids)
    return BatchSpec(make_prompts(allowed, 0, bs, n, out, "timed", 0), (out,) * bs)


@pytest.mark.parametrize("bs,out", [(1, 1), (3, 12)])
def test_run_forces_exact_length_and_orders_stamps(backend, bs, out):
    t = backend.run(batch(backend.model, bs, 16, out))
    assert t.output_tokens == (out,) * bs
    assert t.start_s < t.first_token_s <= t.last_token_s <= t.end_s
    if out == 1:
        assert t.first_token_s == t.last_token_s


def test_eos_is_suppressed_until_the_forced_length(backend):
    """Make EOS the top logit at every step: the forced length must still hold, where plain generate stops."""
    import torch

    eos = backend.eos_ids[0]
    hook = backend.net.lm_head.register_forward_hook(lambda module, args, out: out.index_add(
        -1, torch.tensor([eos]), torch.full((*out.shape[:-1], 1), 1e4)))
    try:
        spec = batch(backend.model, 2, 8, 6)
        plain = backend.net.generate(torch.tensor(spec.prompts), max_new_tokens=6, do_sample=False,
                                     eos_token_id=eos, pad_token_id=eos)
        assert tokens_produced(plain[:, 8:].tolist(), [eos], [6, 6]) == (1, 1)  # the hook works: EOS first
        t = backend.run(spec)
    finally:
        hook.remove()
    assert t.output_tokens == (6, 6)


def test_mixed_lengths_are_left_padded_and_masked(backend):
    """A short prompt batched with a long one generates what it generates alone: padding changes nothing."""
    allowed = allowed_token_ids(backend.model.hf_config.vocab_size, backend.model.special_token_ids)
    short, long = make_prompts(allowed, 1, 1, 8, 6, "timed", 0)[0], make_prompts(allowed, 1, 1, 24, 6, "timed", 0)[0]
    together = backend.run(BatchSpec([short, long], (6, 6)))
    alone = backend.run(BatchSpec([short], (6,)))
    assert together.token_ids[0] == alone.token_ids[0]
    assert together.output_tokens == (6, 6)


def test_per_sequence_budgets_and_stamps(backend):
    t = backend.run(BatchSpec(batch(backend.model, 2, 16, 6).prompts, (3, 6)))
    assert t.output_tokens == (3, 6) and [len(ids) for ids in t.token_ids] == [3, 6]
    assert t.request_first_token_s == (t.first_token_s, t.first_token_s)
    assert t.request_last_token_s[0] < t.request_last_token_s[1] == t.last_token_s
    assert t.tpot_ms == pytest.approx((t.last_token_s - t.first_token_s) * 1e3 / 5)


def test_eos_stops_a_sequence_when_not_forced(backend):
    import torch

    eos = backend.eos_ids[0]
    hook = backend.net.lm_head.register_forward_hook(lambda module, args, out: out.index_add(
        -1, torch.tensor([eos]), torch.full((*out.shape[:-1], 1), 1e4)))
    try:
        t = backend.run(BatchSpec(batch(backend.model, 2, 8, 6).prompts, (6, 6), forced=False))
    finally:
        hook.remove()
    assert t.output_tokens == (1, 1) and t.token_ids == ((eos,), (eos,))


def test_sampling_repeats_with_the_same_seeds(backend):
    prompts = batch(backend.model, 2, 16, 8).prompts
    hot = Sampling(temperature=1.0, top_p=0.9, top_k=0)
    a, b, c = (backend.run(BatchSpec(prompts, (8, 8), sampling=hot, seeds=seeds)).token_ids
               for seeds in ((1, 2), (1, 2), (3, 4)))
    greedy = backend.run(BatchSpec(prompts, (8, 8))).token_ids
    assert a == b and a != c and a != greedy

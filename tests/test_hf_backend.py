"""The HF backend's timing and length checks, on the real tiny model."""

import pytest

from backends.hf import HFBackend, HFOptions, StepClock, tokens_produced
from harness.config import ModelConfig
from harness.inputs import allowed_token_ids, make_prompts
from harness.models import resolve_model
from harness.sweep import SweepShape
from harness.timing import BatchSpec


def test_step_clock_skips_the_prompt_and_stamps_each_step():
    synced = []
    clock = StepClock(lambda: synced.append(1))
    clock.put("prompt")
    for _ in range(5):
        clock.put("tokens")
    clock.end()
    assert len(clock.stamps) == 5 and len(synced) == 5
    assert clock.stamps == sorted(clock.stamps)


def test_tokens_produced_counts_up_to_first_eos():
    assert tokens_produced([[5, 6, 7, 8], [5, 2, 2, 2], [5, 6, 7, 2]], eos_ids=[2], requested=4) == (4, 2, 4)


@pytest.fixture(scope="module")
def backend():
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    b = HFBackend(HFOptions(name="hf", device="cpu"), model, SweepShape(16, 512, 64))
    b.load()
    yield b
    b.close()


def batch(model, bs, n, out):
    allowed = allowed_token_ids(model.hf_config.vocab_size, model.special_token_ids)
    return BatchSpec(make_prompts(allowed, 0, bs, n, out, "timed", 0), out)


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
        assert tokens_produced(plain[:, 8:].tolist(), [eos], 6) == (1, 1)  # the hook works: EOS first
        t = backend.run(spec)
    finally:
        hook.remove()
    assert t.output_tokens == (6, 6)

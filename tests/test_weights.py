"""Deterministic random weights: any slice of a parameter equals that slice of the whole, on every build path."""

import pytest
import torch

from harness.config.sections import ModelConfig
from harness.model import weights
from harness.model.spec import resolve_model


@pytest.fixture(scope="module")
def tiny():
    return resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))


@pytest.mark.parametrize("shape,dim,start,stop", [
    ((1000, 1300), 0, 300, 700),      # column-parallel rows, not on a tile edge
    ((1000, 1300), 1, 333, 1299),     # row-parallel columns
    ((4, 300, 700), 0, 1, 3),         # fused experts: whole experts
    ((4, 300, 700), 1, 100, 200),     # a middle dimension
    ((4, 300, 700), 2, 5, 600),
])
def test_a_shard_is_the_slice_of_the_full_tensor(shape, dim, start, stop):
    full = weights.full_tensor("w.weight", shape, torch.bfloat16)
    shard = weights.shard_tensor("w.weight", shape, dim, start, stop, torch.bfloat16)
    assert torch.equal(shard, full.narrow(dim, start, stop - start))


def test_values_depend_on_seed_and_name_only():
    a = weights.full_tensor("a.weight", (300, 600), torch.float32)
    assert torch.equal(a, weights.full_tensor("a.weight", (300, 600), torch.float32))
    assert not torch.equal(a, weights.full_tensor("b.weight", (300, 600), torch.float32))
    assert not torch.equal(a, weights.full_tensor("a.weight", (300, 600), torch.float32, seed=1))
    assert a.std().item() == pytest.approx(0.02, rel=0.05) and abs(a.mean().item()) < 1e-3
    assert weights.full_tensor("a.weight", (300, 600), torch.float32, init_range=0.1).std().item() == \
        pytest.approx(0.1, rel=0.05)


def test_norms_are_ones_and_biases_zeros():
    assert torch.equal(weights.full_tensor("model.norm.weight", (8,), torch.float32), torch.ones(8))
    assert torch.equal(weights.full_tensor("q_proj.bias", (8,), torch.float32), torch.zeros(8))
    assert torch.equal(weights.shard_tensor("q_proj.bias", (8,), 0, 2, 6, torch.float32), torch.zeros(4))


def test_build_empty_keeps_buffers_real_and_parameters_on_meta(tiny):
    model = weights.build_empty(tiny.hf_config, dtype=torch.float32)
    assert all(p.is_meta for p in model.parameters())
    inv_freq = model.model.rotary_emb.inv_freq
    assert not inv_freq.is_meta and inv_freq[0].item() == 1.0  # computed by the model's own constructor


def test_materialize_gives_every_parameter_its_values(tiny):
    model = weights.build_empty(tiny.hf_config, dtype=torch.float32)
    weights.materialize(model, "cpu", init_range=weights.init_range_of(tiny.hf_config))
    params = dict(model.named_parameters())
    assert not any(p.is_meta for p in params.values()) and not any(p.requires_grad for p in params.values())
    name = "model.layers.1.mlp.down_proj.weight"
    assert torch.equal(params[name], weights.full_tensor(name, params[name].shape, torch.float32))
    assert torch.equal(params["model.norm.weight"], torch.ones(128))


def test_materialize_in_parts_keeps_tied_weights_tied(tiny):
    config = tiny.hf_config.__class__.from_dict({**tiny.hf_config.to_dict(), "tie_word_embeddings": True})
    model = weights.build_empty(config, dtype=torch.float32)
    done = {}
    for name in ("model", "lm_head"):  # as accelerate does it, one mapped module at a time
        weights.materialize(model.get_submodule(name), "cpu", prefix=name, done=done)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not model.lm_head.weight.is_meta

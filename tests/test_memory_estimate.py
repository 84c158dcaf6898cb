"""The memory estimate against what the host really holds: weights and KV cache within 15% of the measured growth.

Measured in this process's RSS (harness/measure/peak_memory.py): before loading, after loading, and with a prefill's KV cache
alive. Freed memory is handed back to the kernel first, so the readings are what is live, not what the allocator
keeps. The transient part of a point (activations, logits) is left out: the report compares it per point
(report.md, "Memory: estimate vs measured").
"""

import os

import pytest
import torch

from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.measure.peak_memory import process_rss_bytes, release_freed_host_memory
from harness.model.memory import kv_cache_bytes
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape


def live_bytes() -> int:
    release_freed_host_memory()
    return process_rss_bytes(os.getpid())


# tiny-llama: the KV cache (128 MiB) outweighs the weights (33 MiB); llama-1b: the weights (4.1 GiB) dominate.
@pytest.mark.engine
@pytest.mark.parametrize("preset,batch_size,tokens", [("tiny-llama", 64, 2048), ("llama-1b", 2, 256)])
def test_weights_and_kv_cache_within_15_percent_of_measured_growth(preset, batch_size, tokens):
    from transformers import DynamicCache

    model = resolve_model(ModelConfig(preset=preset, dtype="fp32"))
    options = HFOptions(name="hf")
    with torch.inference_mode():
        torch.ones(8, 8) @ torch.ones(8, 8)  # the first op's one-off runtime allocations are not the model's
        # Nor is the code a first load imports (transformers' auto classes and model code: about 170 MiB of RSS when
        # this test runs first in its process): a throwaway load of a small model first.
        HFBackend(options, resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32")), SweepShape(1, 8, 1)).load()
        before = live_bytes()
        backend = HFBackend(options, model, SweepShape(batch_size, tokens, 1))
        backend.load()
        loaded = live_bytes()
        ids = torch.randint(3, model.hf_config.vocab_size, (batch_size, tokens))
        cache = DynamicCache(config=model.hf_config)
        backend.net.model(input_ids=ids, past_key_values=cache, use_cache=True)  # the base model: no logits kept
        with_cache = live_bytes()
    estimate = HFBackend.estimate_memory(options, model, batch_size, tokens, 0)
    expected_kv = kv_cache_bytes(model, batch_size, tokens)
    assert cache.get_seq_length() == tokens
    measured_weights, measured_kv = loaded - before, with_cache - loaded
    print(f"{preset}: weights {measured_weights / 2**20:.1f} MiB measured, {estimate.weights_bytes / 2**20:.1f} "
          f"estimated; KV {measured_kv / 2**20:.1f} MiB measured, {expected_kv / 2**20:.1f} estimated")
    assert with_cache - before == pytest.approx(estimate.weights_bytes + expected_kv, rel=0.15)
    assert measured_weights == pytest.approx(estimate.weights_bytes, rel=0.15)
    if expected_kv > estimate.weights_bytes:  # a small cache's share is within the runtime's own few MiB
        assert measured_kv == pytest.approx(expected_kv, rel=0.15)

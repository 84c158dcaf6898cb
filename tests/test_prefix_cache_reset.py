"""The prefix cache between points: emptied before each point (a point's hit rate is its own), kept with
`keep_prefix_cache: true`. The runner's side on the synthetic engine (its `prefix_caching` keeps the prompts it served
and reports one seen before as cached), and vLLM's own reset in process."""

import numpy as np
import pytest

from backends.registry import BACKENDS
from harness.config.sections import ModelConfig
from harness.config.sweep import load_config
from harness.measure.records import RunContext
from harness.measure.sink import result_row
from harness.model.spec import resolve_model
from harness.plan.sweep import plan_sweep
from harness.run.runner import EntryRunner, RunEvents
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from workloads.registry import WORKLOADS, build_workload


@pytest.fixture(scope="module")
def model():
    return resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))


def hit_rates(tmp_path, model, keep: bool):
    """Two rate points with the same lengths: the same timed prompts (a stream's prompts do not depend on its rate),
    so the second point finds the first's in a cache that was kept."""
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, dtype: fp32}\nscenario: stream\n"
                    "backends: [{name: synthetic, ttft_ms: 1, tpot_ms: 1, prefix_caching: true}]\n"
                    "input_lengths: [16]\noutput_lengths: [4]\n"
                    # the second rate runs however the first went: on a loaded machine 200/s was once judged to
                    # saturate the null engine, and the point this test reads was skipped
                    "stream: {num_requests: 6, num_warmup_requests: 2, request_rates: [200, 300], "
                    "stop_at_saturation: false}\n"
                    f"keep_prefix_cache: {str(keep).lower()}\n")
    config = load_config(path, [], BACKENDS, WORKLOADS)
    [plan] = plan_sweep(config, model, BACKENDS, build_workload(config, model))
    results = []
    context = RunContext("t", "synthetic", "tiny-llama", "fp32", "cpu", 1, 1)
    EntryRunner(plan, model, config, context, RunEvents(results.append)).run(set())
    return [result_row(r)["prefix_cache_hit_rate"] for r in sorted(results, key=lambda r: r.point.request_rate)]


def test_each_point_starts_with_an_empty_prefix_cache(tmp_path, model):
    assert hit_rates(tmp_path, model, keep=False) == [0.0, 0.0]


def test_a_kept_cache_serves_a_repeated_prompt(tmp_path, model):
    assert hit_rates(tmp_path, model, keep=True) == [0.0, 1.0]


@pytest.mark.engine
def test_vllm_forgets_its_cached_prompts_on_reset():
    """vLLM in process, prefix caching on: the same stream again is served from the cache; after the reset the
    runner calls before a point, none of it is."""
    from backends.vllm_engine import VLLMBackend, VLLMOptions
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    options = VLLMOptions(name="vllm", enforce_eager=True, kv_cache_memory_bytes=268435456,
                          enable_prefix_caching=True)
    backend = VLLMBackend(options, model, SweepShape(max_batch_size=0, max_input_length=300, max_output_length=4,
                                                     scenario="stream"))
    rng = np.random.default_rng(0)
    prompts = [tuple(int(t) for t in rng.integers(3, 32000, 300)) for _ in range(4)]
    stream = StreamSpec(BatchSpec(prompts, (4,) * 4), (0.0,) * 4)

    def cached() -> int:
        return sum(r.cached_tokens or 0 for r in backend.serve(stream).requests)

    backend.load()
    try:
        assert cached() == 0
        assert cached() > 0  # the same prompts again: their full blocks (128 tokens on a CPU) from the cache
        backend.reset_prefix_cache()
        assert cached() == 0
    finally:
        backend.close()

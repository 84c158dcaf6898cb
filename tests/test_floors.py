"""--plan's roofline floors (harness/plan/floors.py) against numbers worked out here by hand for tiny-llama in fp32:
the memory and compute bounds, tensor parallelism's split and all-reduces, a pipeline's hand-offs, ZeRO offload over
the host link, and which bound is named."""

import pytest

from harness.config.sections import ModelConfig
from harness.model.hardware import Peaks
from harness.model.roofline import Shape, roofline_latency_s
from harness.model.spec import resolve_model
from harness.plan.engine import Placement
from harness.plan.floors import COMPUTE, HOST_LINK, INTERCONNECT, MEMORY, NO_LINKS, Layout, Links, floors_of

# tiny-llama (harness/presets/tiny-llama/config.json): hidden 128, 2 layers, 4 heads of 32, 2 KV heads, MLP 344,
# vocabulary 32,000, untied. Per layer: q and o 128x128, k and v 128x64, MLP 3 x 128 x 344, 2 norms of 128.
LAYER = 2 * 128 * 128 + 2 * 128 * 64 + 3 * 128 * 344 + 2 * 128
BODY = 2 * LAYER + 128  # and the final norm
EMBEDDING = 32000 * 128
WEIGHTS_READ = (BODY + EMBEDDING) * 4  # body and head, fp32; the input embedding is a lookup
KV_PER_TOKEN = 2 * 2 * 64 * 4  # keys and values, 2 layers, 2 KV heads x 32, fp32
PEAKS = Peaks(100.0, 1.0, "test")  # 100 GB/s, 1 TFLOP/s
ONE_GPU = Layout.of(Placement("cuda"))


@pytest.fixture(scope="module")
def model():
    return resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))


def test_the_parameter_count_the_floors_start_from(model):
    assert model.num_params == BODY + 2 * EMBEDDING == 8_555_136


def test_decode_is_bound_by_memory_bandwidth_by_hand(model):
    f = floors_of(model, ONE_GPU, PEAKS, NO_LINKS, 1, 100, 21)
    context = 100 + 21 / 2  # mid-output, as explain() counts a measured point
    moved = WEIGHTS_READ + context * KV_PER_TOKEN
    computed = 2 * (BODY + EMBEDDING) + 4 * 2 * 128 * context
    assert f.tpot.bound == MEMORY
    assert f.tpot_floor_ms == pytest.approx(moved / 100e9 * 1e3)
    assert f.tpot.bounds_s[COMPUTE] == pytest.approx(computed / 1e12)
    assert f.per_user_ceiling_tokens_per_s == pytest.approx(1e3 / f.tpot_floor_ms)


def test_a_long_prompt_binds_on_compute_by_hand(model):
    f = floors_of(model, ONE_GPU, PEAKS, NO_LINKS, 1, 1000, 1)
    # Body matmuls for 1,000 tokens, the head once, causal attention 2 x layers x width x 1000^2.
    computed = 2 * BODY * 1000 + 2 * EMBEDDING + 2 * 2 * 128 * 1000**2
    assert computed == 1_246_464_000
    assert f.ttft.bound == COMPUTE and f.ttft_floor_ms == pytest.approx(1.246464)
    assert f.ttft.bounds_s[MEMORY] == pytest.approx((WEIGHTS_READ + 1000 * KV_PER_TOKEN) / 100e9)
    assert f.tpot is None and f.per_user_ceiling_tokens_per_s is None
    assert f.throughput_ceiling_tokens_per_s == pytest.approx(1 / 1.246464e-3)


def test_one_device_request_floor_is_roofline_latency_s(model):
    f = floors_of(model, ONE_GPU, PEAKS, NO_LINKS, 4, 100, 21)
    assert f.latency_floor_ms == pytest.approx(roofline_latency_s(Shape.of(model), [100] * 4, 21, 100e9, 1e12) * 1e3)


def test_tensor_parallelism_divides_the_bytes_and_adds_the_all_reduces(model):
    one = floors_of(model, ONE_GPU, PEAKS, Links(100.0, 64.0), 2, 100, 21)
    tp2 = floors_of(model, Layout.of(Placement("cuda", num_devices=2, tp_size=2)), PEAKS, Links(100.0, 64.0),
                    2, 100, 21)
    assert tp2.tpot.bounds_s[MEMORY] == pytest.approx(one.tpot.bounds_s[MEMORY] / 2)
    assert tp2.tpot.bounds_s[COMPUTE] == pytest.approx(one.tpot.bounds_s[COMPUTE] / 2)
    assert INTERCONNECT not in one.tpot.bounds_s
    # 2 all-reduces a layer x 2 layers of 2 sequences x 128 x 4 bytes; a 2-GPU ring sends 2(2-1)/2 = 1 of each.
    assert tp2.tpot.bounds_s[INTERCONNECT] == pytest.approx(2 * 2 * 2 * 128 * 4 / 100e9)
    assert tp2.ttft.bounds_s[INTERCONNECT] == pytest.approx(2 * 2 * 2 * 100 * 128 * 4 / 100e9)
    slow = floors_of(model, Layout.of(Placement("cuda", num_devices=2, tp_size=2)), PEAKS, Links(0.001, 64.0),
                     2, 100, 21)
    assert slow.tpot.bound == INTERCONNECT and slow.tpot_floor_ms == pytest.approx(4096 / 1e6 * 1e3)
    assert tp2.per_gpu_ceiling_tokens_per_s == pytest.approx(tp2.throughput_ceiling_tokens_per_s / 2)


def test_a_pipeline_divides_the_bytes_but_not_the_time(model):
    """Accelerate's device_map over 2 GPUs: the stages run one after another, handing the activations over."""
    two = floors_of(model, Layout.of(Placement("cuda", num_devices=2)), PEAKS, Links(100.0, 64.0), 1, 100, 21)
    one = floors_of(model, ONE_GPU, PEAKS, Links(100.0, 64.0), 1, 100, 21)
    assert two.tpot.bounds_s[MEMORY] == pytest.approx(one.tpot.bounds_s[MEMORY])
    assert two.tpot.bounds_s[INTERCONNECT] == pytest.approx(128 * 4 / 100e9)


def test_zero_offload_reads_the_weights_over_the_host_link(model):
    offloaded = Layout.of(Placement("cuda", num_devices=1, ranks=1), "deepspeed_zero", "cpu")
    f = floors_of(model, offloaded, PEAKS, Links(100.0, 10.0), 1, 100, 21)
    assert f.tpot.bound == HOST_LINK and f.ttft.bound == HOST_LINK
    assert f.tpot_floor_ms == pytest.approx(WEIGHTS_READ / 10e9 * 1e3)
    in_memory = Layout.of(Placement("cuda", num_devices=1, ranks=1), "deepspeed_zero", "none")
    assert HOST_LINK not in floors_of(model, in_memory, PEAKS, Links(100.0, 10.0), 1, 100, 21).tpot.bounds_s
    # Two ranks: each reads half over its own link and gathers the other half from its peer.
    two = floors_of(model, Layout.of(Placement("cuda", num_devices=2, ranks=2), "deepspeed_zero", "cpu"), PEAKS,
                    Links(100.0, 10.0), 1, 100, 21)
    assert two.tpot.bounds_s[HOST_LINK] == pytest.approx(WEIGHTS_READ / 2 / 10e9)
    assert two.tpot.bounds_s[INTERCONNECT] == pytest.approx(WEIGHTS_READ / 2 / 100e9)


def test_a_cpu_counts_as_one_device_whatever_its_ranks(model):
    """The CPU probe measured the whole machine: DeepSpeed's 2 ranks on it share one memory."""
    ranks = floors_of(model, Layout.of(Placement("cpu", num_devices=2, tp_size=2)), PEAKS, NO_LINKS, 1, 100, 21)
    one = floors_of(model, Layout.of(Placement("cpu")), PEAKS, NO_LINKS, 1, 100, 21)
    assert ranks.tpot_floor_ms == one.tpot_floor_ms
    assert ranks.num_devices == 1


def test_long_outputs_are_sampled_close_to_every_step(model):
    exact = roofline_latency_s(Shape.of(model), [100] * 8, 1000, 100e9, 1e12) * 1e3
    assert floors_of(model, ONE_GPU, PEAKS, NO_LINKS, 8, 100, 1000).latency_floor_ms == pytest.approx(exact, rel=1e-3)


def test_quantized_weights_count_their_own_bytes(model):
    """int8 on a GPU: a byte a weight (harness/model/quantized.py) instead of fp32's 4; the KV cache stays fp32."""
    int8 = floors_of(model.loaded_as("int8", "cuda"), ONE_GPU, PEAKS, NO_LINKS, 1, 100, 21)
    assert int8.tpot_floor_ms == pytest.approx(((BODY + EMBEDDING) * 1 + (100 + 10.5) * KV_PER_TOKEN) / 100e9 * 1e3)


def test_dry_run_prints_each_batch_points_floor_on_a_named_gpu(capsys):
    from app.cli import main
    from harness.model.hardware import datasheet_peaks

    args = ["yamls/cpu-tiny.yaml", "backends=[{name: hf, device: cpu}]", "batch_sizes=[1,4]", "input_lengths=[128]",
            "output_lengths=[32]"]
    assert main([*args, "--dry-run", "hardware.gpu=h100-sxm"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Roofline floors of the batch points" in out
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    for batch in (1, 4):
        f = floors_of(model, ONE_GPU, datasheet_peaks("h100-sxm", "fp32"), Links.of_gpu("h100-sxm"), batch, 128, 32)
        assert f"│ hf │ 128 │ 32 │ {batch} │ {f.ttft_floor_ms:.3g} │ {f.tpot_floor_ms:.3g} │" in out
    # On this machine's CPU --dry-run measures no peaks, so it prints no floors.
    assert main([*args, "--dry-run"]) == 0
    assert "Roofline floors" not in capsys.readouterr().out

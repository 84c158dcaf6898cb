"""Model families read from config.json alone (harness/model/families.py): real configs from the model cards
(tests/fixtures/model-cards) counted as the cards state, KV-cache bytes per token as engines store them (MLA's latent,
sliding windows), `--plan` through the CLI without torch, an unsizable config refused in one line; and, in the engine
tier, every family's count and fields held to transformers' own model built on the meta device."""

import json
import subprocess
import sys

import pytest

from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.model import config_json as config_view
from harness.model.families import kv_layout
from harness.model.memory import kv_cache_bytes
from harness.model.roofline import Shape, decode_bytes_per_step, decode_flops_per_step, prefill_flops
from harness.model.spec import UNBOUNDED_POSITIONS, resolve_model
from tests.conftest import REPO

CARDS = REPO / "tests" / "fixtures" / "model-cards"
# The parameter count each card states (tests/fixtures/model-cards/README.md); held within 1%.
CARD_PARAMETERS = {
    "bloom-176b": 176_247_271_424,
    "falcon-7b": 7_217_189_760 - 65_024 * 4_544,  # the checkpoint stores lm_head, a copy of the tied embedding
    "falcon-40b": 41.8e9 - 65_024 * 8_192,  # likewise
    "gpt2": 124_439_808,
    "gpt-j-6b": 6_053_381_344,
    "gpt-neox-20b": 20_554_567_680,
    "opt-6.7b": 6.7e9,
    "gemma-2-9b": 9_241_705_984,
    "gemma-3-1b": 1.0e9,
    "phi-3-mini-4k": 3.8e9,
    "deepseek-v2-lite": 15.7e9,
    "deepseek-v3": 671e9,  # the main model: transformers builds no multi-token-prediction module (14B more)
    "qwen1.5-moe-a2.7b": 14.3e9,
    "qwen2.5-7b": 7.61e9,
    "qwen3-30b-a3b": 30.5e9,
    "mixtral-8x7b": 46.7e9,
    "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.6e9,
    "mistral-7b": 7.24e9,
    "mpt-7b": 6.7e9,
    # The text model of Llama-4-Scout-17B-16E: 107.8B of the card's 109B (the rest is the vision encoder).
    "llama-4-scout-text": 109e9,
}
TOLERANCE = {"llama-4-scout-text": 0.02}


def card(name: str) -> dict:
    return json.loads((CARDS / name / "config.json").read_text())


def model_of(name: str):
    return resolve_model(ModelConfig(name_or_path=str(CARDS / name)))


@pytest.mark.parametrize("name", CARD_PARAMETERS)
def test_card_counts_as_the_card_states(name):
    view = config_view.read_local(str(CARDS / name))
    assert view is not None, f"{name} should be read without transformers"
    assert config_view.missing_planned(view) is None
    assert config_view.count_parameters(view) == pytest.approx(CARD_PARAMETERS[name], rel=TOLERANCE.get(name, 0.01))


def test_llama4_routes_one_expert_and_its_shared_one():
    """Llama-4-Scout: 17B active per token (the card's figure): attention, the shared expert and 1 of 16 experts."""
    shape = Shape.of(model_of("llama-4-scout-text"))
    assert (shape.experts, shape.experts_per_token, shape.moe_layers) == (16, 1, 48)
    assert shape.body_params_per_token + 2 * shape.embedding_params == pytest.approx(17e9, rel=0.02)
    # Chunked attention on 36 of 48 layers (every 4th is global), 8,192 tokens a chunk.
    assert (shape.kv.window_layers, shape.kv.window_tokens) == (36, 8192)


def test_deepseek_v3_caches_its_latent_not_heads():
    """MLA caches kv_lora_rank + qk_rope_head_dim = 576 values per layer per token, once (vLLM, SGLang): 70 KB a token
    in bf16, where 2 x 128 heads x head_dim would be 25x more."""
    model = model_of("deepseek-v3")
    assert kv_cache_bytes(model, 1, 1) == 61 * 576 * 2 == 70_272
    shape = Shape.of(model)
    assert shape.kv_bytes_per_token == 61 * 576 * 2 and shape.kv_bytes_at(1000) == 1000 * 61 * 576 * 2
    assert kv_cache_bytes(model, 3, 1000) == 3 * shape.kv_bytes_at(1000)  # one source for both
    # QK^T over nope + rope (192) per head, AV over v_head_dim (128): 2 FLOPs each per key, 61 layers.
    assert (shape.attention_width, shape.value_width) == (128 * 192, 128 * 128)
    dense = decode_flops_per_step(shape, 1, 0)
    assert decode_flops_per_step(shape, 1, 10) - dense == 2 * 61 * 128 * (192 + 128) * 10


def test_gemma2_local_layers_hold_their_window():
    """Gemma-2-9B: 42 layers x 8 KV heads x 256 x 2 (keys, values) x 2 bytes = 344,064 bytes a token while every
    layer holds it; past 4,096 tokens the 21 sliding layers keep 4,096."""
    model = model_of("gemma-2-9b")
    per_layer = 2 * 8 * 256 * 2
    shape = Shape.of(model)
    assert shape.kv_bytes_per_token == 42 * per_layer == 344_064
    assert shape.kv_bytes_at(4096) == 4096 * 42 * per_layer
    assert shape.kv_bytes_at(8192) == (21 * 8192 + 21 * 4096) * per_layer
    assert kv_cache_bytes(model, 2, 8192) == 2 * shape.kv_bytes_at(8192)
    assert decode_bytes_per_step(shape, 1, 8192) - decode_bytes_per_step(shape, 1, 0) == shape.kv_bytes_at(8192)
    # A prompt past the window: its sliding layers' queries attend to 4,096 keys at most.
    full = dict(vars(shape))
    full.update(kv=None)
    assert prefill_flops(shape, [8192]) < prefill_flops(Shape(**full), [8192])
    assert prefill_flops(shape, [4096]) == prefill_flops(Shape(**full), [4096])


def test_window_rules_per_family():
    assert (kv_layout(model_of("gemma-3-1b").config).window_layers, kv_layout(model_of("gemma-3-1b").config)
            .window_tokens) == (22, 512)  # 26 layers, every 6th global
    assert kv_layout(model_of("mistral-7b").config).window_layers == 32  # Mistral-7B-v0.1: sliding_window 4096
    assert kv_layout(model_of("qwen2.5-7b").config).window_layers == 0  # use_sliding_window false
    assert kv_layout(model_of("mixtral-8x7b").config).window_layers == 0  # sliding_window null


def test_families_name_their_fields_their_own_way():
    falcon7, falcon40 = model_of("falcon-7b").config, model_of("falcon-40b").config
    assert (falcon7.num_key_value_heads, falcon7.intermediate_size) == (1, 4 * 4544)  # multi_query, 4 x hidden
    assert falcon7.max_position_embeddings == 2048  # FalconConfig's default: the card states none
    assert falcon40.num_key_value_heads == 8
    gpt2 = model_of("gpt2")
    assert (gpt2.config.hidden_size, gpt2.config.intermediate_size, gpt2.max_positions) == (768, 3072, 1024)
    v3 = model_of("deepseek-v3").config
    assert (v3.num_local_experts, v3.num_moe_layers, v3.shared_expert_intermediate_size) == (256, 58, 2048)


def test_bloom_has_no_position_limit():
    """ALiBi adds a bias per distance and has no position table: no length is too long for the model itself."""
    model = model_of("bloom-176b")
    assert getattr(model.config, "max_position_embeddings", None) is None
    assert model.max_positions == UNBOUNDED_POSITIONS


PROBE = """import sys
from app.cli import main
codes = [main(['yamls/my-model.yaml', 'model.name_or_path=' + d, '--plan', 'hardware.gpu=a100-sxm-80gb',
               'hardware.num_gpus=8', 'input_lengths=[512]']) for d in sys.argv[1:]]
print('CODES', codes, 'HEAVY', sorted(m for m in ('torch', 'transformers') if m in sys.modules))
"""


def test_every_card_plans_without_torch():
    """What fails here used to end in a traceback (BLOOM, Falcon, GPT-2: AttributeError, exit 1)."""
    folders = [str(CARDS / name) for name in CARD_PARAMETERS]
    proc = subprocess.run([sys.executable, "-c", PROBE, *folders], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert f"CODES {[0] * len(folders)} HEAVY []" in proc.stdout, proc.stdout[-800:] + proc.stderr[-2000:]


@pytest.mark.parametrize("fields,missing", [
    ({"model_type": "mamba", "vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 2}, "num_attention_heads"),
    ({"model_type": "a-family-nobody-knows", "num_hidden_layers": 2}, None),
    ({"model_type": "clip"}, "causal LM"),  # sizable, but nothing AutoModelForCausalLM builds
])
def test_an_unsizable_config_is_refused_in_one_line(tmp_path, fields, missing):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    with pytest.raises(UserError) as error:
        resolve_model(ModelConfig(name_or_path=str(tmp_path)))
    message = str(error.value)
    assert "\n" not in message and (missing is None or missing in message), message


def test_an_unsizable_config_exits_2_without_a_traceback(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba", "vocab_size": 300, "hidden_size": 64,
                                                      "num_hidden_layers": 2}))
    probe = ("import sys; from app.cli import main; "
             "print('CODE', main(['yamls/my-model.yaml', 'model.name_or_path=' + sys.argv[1], '--plan']))")
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert "CODE 2" in proc.stdout and "Traceback" not in proc.stderr, proc.stdout[-500:] + proc.stderr[-1500:]
    assert "num_attention_heads" in proc.stderr + proc.stdout


# Small values for whichever of these fields a card states, so that transformers builds each family in milliseconds
# with the card's structure (its biases, norms, MLA, shared experts, windows) intact.
SHRUNK = {"hidden_size": 64, "n_embd": 64, "n_embed": 64, "d_model": 64, "num_attention_heads": 4, "n_head": 4,
          "n_heads": 4, "num_hidden_layers": 4, "n_layer": 4, "n_layers": 4, "intermediate_size": 96, "ffn_dim": 96,
          "ffn_hidden_size": 96, "vocab_size": 300, "head_dim": 16, "max_position_embeddings": 128, "n_positions": 128,
          "max_seq_len": 128, "word_embed_proj_dim": 64, "num_kv_heads": 2, "rotary_dim": 8, "num_experts": 4,
          "n_routed_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
          "shared_expert_intermediate_size": 48, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
          "v_head_dim": 8, "n_group": 1, "topk_group": 1, "sliding_window": 8, "max_window_layers": 2,
          "intermediate_size_mlp": 128, "attention_chunk_size": 8}
PLANNING_FIELDS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
                   "num_hidden_layers", "vocab_size", "max_position_embeddings", "tie_word_embeddings",
                   "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "num_moe_layers",
                   "shared_expert_intermediate_size")


def shrunk(name: str, **changes) -> dict:
    fields = card(name)
    fields.pop("quantization_config", None)  # an fp8 checkpoint's: nothing to build from
    fields.update(bos_token_id=0, eos_token_id=0, pad_token_id=0)  # within the small vocabulary
    small = {k: v for k, v in SHRUNK.items() if fields.get(k) is not None}
    if fields.get("num_key_value_heads") is not None:  # GQA stays GQA, MHA stays MHA
        small["num_key_value_heads"] = 2 if fields["num_key_value_heads"] < fields["num_attention_heads"] else 4
    if fields.get("q_lora_rank"):
        small["q_lora_rank"] = 32
    if fields.get("first_k_dense_replace"):
        small["first_k_dense_replace"] = 1  # one dense layer before the MoE ones
    return {**fields, **small, **changes}


@pytest.mark.engine
@pytest.mark.parametrize("name,changes", [(name, {}) for name in CARD_PARAMETERS] + [
    ("qwen2.5-7b", {"use_sliding_window": True}),  # windows from max_window_layers on
    ("falcon-7b", {"parallel_attn": False, "bias": True}),  # two LayerNorms a layer, biases everywhere
    ("falcon-7b", {"multi_query": False}),  # plain multi-head attention
    ("gpt-neox-20b", {"attention_bias": False}),
    ("opt-6.7b", {"enable_bias": False, "word_embed_proj_dim": 32}),  # OPT-350m's projections in and out
    ("gemma-3-1b", {"num_hidden_layers": 7}),  # a global layer (the 6th) among the sliding ones
    ("qwen3-30b-a3b", {"mlp_only_layers": [0], "decoder_sparse_step": 2}),
    ("llama-4-scout-text", {"interleave_moe_layer_step": 2}),  # Maverick's dense layers between MoE ones
])
def test_shrunk_card_counts_as_transformers_builds_it(tmp_path, name, changes):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.model.spec import architecture, view_of

    (tmp_path / "config.json").write_text(json.dumps(shrunk(name, **changes)))
    view = config_view.read_local(str(tmp_path))
    assert view is not None
    hf_config = AutoConfig.from_pretrained(tmp_path)
    slow = view_of(hf_config)  # what planning reads when transformers made the config (overrides, hub ids)
    assert architecture(view) == architecture(hf_config)
    for field in PLANNING_FIELDS:
        assert getattr(view, field, None) == getattr(slow, field, None), field
    assert kv_layout(view) == kv_layout(slow)  # the windows agree with transformers' own layer_types
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    built = sum(p.numel() for p in model.parameters())
    # DeepSeek-V3's router bias is in the checkpoint but a buffer in transformers.
    built += sum(b.numel() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
    assert config_view.count_parameters(view) == built


@pytest.mark.engine
@pytest.mark.parametrize("name,changes", [("gemma-2-9b", {}), ("gemma-3-1b", {"num_hidden_layers": 7}),
                                          ("mistral-7b", {}), ("deepseek-v3", {}), ("deepseek-v2-lite", {}),
                                          ("falcon-7b", {}), ("gpt2", {}), ("llama-4-scout-text", {})])
def test_kv_estimate_holds_what_transformers_caches(tmp_path, name, changes):
    """After a 20-token prefill and 5 decode steps (window 8), transformers' cache holds no more than the estimate,
    and at least 1 / 1.15 of it: its sliding layers keep window - 1 tokens, where the estimate keeps the window."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

    (tmp_path / "config.json").write_text(json.dumps(shrunk(name, **changes)))
    model = resolve_model(ModelConfig(name_or_path=str(tmp_path), dtype="fp32"))
    hf_config = AutoConfig.from_pretrained(tmp_path)
    net = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32).eval()
    cache, ids = DynamicCache(config=hf_config), torch.randint(3, 300, (2, 20))
    with torch.inference_mode():
        net(input_ids=ids, past_key_values=cache, use_cache=True)
        for _ in range(5):
            net(input_ids=ids[:, :1], past_key_values=cache, use_cache=True)
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    estimate = kv_cache_bytes(model, 2, 25)
    assert held <= estimate <= 1.15 * held, (held, estimate)


@pytest.mark.engine
def test_a_multimodal_wrapper_is_planned_by_its_language_model():
    """Gemma-3-4B's config.json is the `gemma3` wrapper, read through transformers: its parameters are the whole
    model's (4,300,079,472 on the card, the vision encoder's 417M included); its KV cache and every planning name
    are its text_config's (34 layers, 4 KV heads x 256; 29 sliding layers of 1,024 tokens, every 6th global)."""
    model = model_of("gemma-3-4b")
    assert model.num_params == pytest.approx(4_300_079_472, rel=0.01)
    assert (model.config.vocab_size, model.config.hidden_size, model.max_positions) == (262_208, 2560, 131_072)
    layout = kv_layout(model.config.text_config)
    assert (layout.full_layers, layout.window_layers, layout.window_tokens) == (5, 29, 1024)
    assert kv_cache_bytes(model, 1, 1) == 34 * 2 * 4 * 256 * 2 == 139_264

"""Planning reads config.json without transformers (harness/model/config_json.py): every field it reads and every
parameter it counts must be what transformers builds, for each preset and for the variants a config.json can
state (GQA, an explicit head_dim, biases, tied embeddings, experts); anything else takes transformers' path."""

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from harness.config.sections import ModelConfig
from harness.model import config_json as config_view
from harness.model.spec import PRESETS_DIR, architecture, count_parameters, preset_names, resolve_model, view_of
from tests.conftest import REPO

LLAMA = json.loads((PRESETS_DIR / "tiny-llama" / "config.json").read_text())
MIXTRAL = {**json.loads((PRESETS_DIR / "mixtral-8x7b" / "config.json").read_text()), "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_local_experts": 4, "vocab_size": 300}
MISTRAL = {**json.loads((PRESETS_DIR / "mistral-7b" / "config.json").read_text()), "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300}
SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300}
QWEN2 = {**json.loads((PRESETS_DIR / "qwen2.5-7b" / "config.json").read_text()), **SMALL, "num_key_value_heads": 2}
# 4 layers, so that mlp_only_layers and decoder_sparse_step leave dense layers between the MoE ones.
QWEN3_MOE = {**json.loads((PRESETS_DIR / "qwen3-30b-a3b" / "config.json").read_text()), **SMALL,
             "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 32, "num_experts": 6,
             "num_experts_per_tok": 2, "moe_intermediate_size": 24}
MPT = {**json.loads((PRESETS_DIR / "mpt-7b" / "config.json").read_text()), "d_model": 64, "n_heads": 4,
       "n_layers": 2, "vocab_size": 300, "max_seq_len": 128}
VARIANTS = {
    "llama-biases": {**LLAMA, "attention_bias": True, "mlp_bias": True},
    "llama-tied-gqa": {**LLAMA, "tie_word_embeddings": True, "num_key_value_heads": 1},
    "llama-head-dim": {**LLAMA, "head_dim": 8},
    "llama-rope-scaling": {**LLAMA, "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                     "original_max_position_embeddings": 512, "rope_type": "llama3"}},
    "mistral": MISTRAL,
    "mixtral": MIXTRAL,
    "qwen2": QWEN2,
    "qwen2-tied": {**QWEN2, "tie_word_embeddings": True},
    "qwen3-moe": QWEN3_MOE,
    "qwen3-moe-dense-layers": {**QWEN3_MOE, "mlp_only_layers": [0], "decoder_sparse_step": 2},
    "qwen3-moe-attention-bias": {**QWEN3_MOE, "attention_bias": True, "mlp_only_layers": None},
    "qwen3-moe-head-dim-unstated": {k: v for k, v in QWEN3_MOE.items() if k != "head_dim"},
    "mpt": MPT,  # tie_word_embeddings not stated: MptConfig ties
    "mpt-untied": {**MPT, "tie_word_embeddings": False},
    "mpt-expansion-unstated": {k: v for k, v in MPT.items() if k != "expansion_ratio"},
}
# What planning reads, by its own names (harness/model/config_json.py); transformers' config answers those it has.
PLANNING_FIELDS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
                   "num_hidden_layers", "vocab_size", "max_position_embeddings", "tie_word_embeddings",
                   "num_local_experts", "num_experts_per_tok", "moe_intermediate_size")


def meta_parameters(hf_config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(hf_config).parameters())


def same_as_transformers(folder):
    view = config_view.read_local(str(folder))
    assert view is not None
    hf_config = AutoConfig.from_pretrained(folder)
    assert architecture(view) == architecture(hf_config)
    slow = view_of(hf_config)  # what planning reads when transformers made the config (overrides, hub ids)
    for name in PLANNING_FIELDS + ("num_moe_layers",):
        assert getattr(view, name, None) == getattr(slow, name, None), name
    for name in PLANNING_FIELDS:  # transformers' own answer (through its attribute_map), where it has one
        if getattr(hf_config, name, None) is not None:
            assert getattr(view, name) == getattr(hf_config, name), name
    assert config_view.count_parameters(view) == meta_parameters(hf_config)


# Presets with a vision tower (harness/model/spec.py's takes_images): transformers sizes them, as any family not read
# here (test_an_image_text_preset_is_sized_by_transformers).
IMAGE_TEXT = [p for p in preset_names() if "vision_config" in json.loads((PRESETS_DIR / p / "config.json").read_text())]


@pytest.mark.parametrize("preset", [p for p in preset_names() if p not in IMAGE_TEXT])
def test_every_preset_reads_and_counts_as_transformers_builds_it(preset):
    same_as_transformers(PRESETS_DIR / preset)
    model = resolve_model(ModelConfig(preset=preset))
    assert model.built_hf_config is None  # nothing of transformers was needed
    hf_config = AutoConfig.from_pretrained(PRESETS_DIR / preset)
    ids = [getattr(hf_config, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id")]
    flat = [i for v in ids for i in (v if isinstance(v, list) else [v]) if i is not None]
    assert model.special_token_ids == frozenset(flat)
    assert model.hf_config.to_dict() == hf_config.to_dict()  # engines still get transformers' config


def test_an_image_text_preset_is_sized_by_transformers():
    from transformers import AutoModelForImageTextToText

    assert IMAGE_TEXT == ["tiny-llava-next"]
    folder = PRESETS_DIR / "tiny-llava-next"
    assert config_view.read_local(str(folder)) is None
    model = resolve_model(ModelConfig(preset="tiny-llava-next"))
    hf_config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):  # the language model, the vision tower and the projector
        assert model.num_params == sum(p.numel() for p in AutoModelForImageTextToText.from_config(hf_config)
                                       .parameters())
    assert architecture(model.config) == architecture(hf_config.text_config)
    text = hf_config.text_config
    assert model.special_token_ids == {text.bos_token_id, text.eos_token_id, hf_config.image_token_index}
    assert model.eos_token_ids == {text.eos_token_id}


@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_count_as_transformers_builds_them(tmp_path, variant):
    (tmp_path / "config.json").write_text(json.dumps(VARIANTS[variant]))
    same_as_transformers(tmp_path)


@pytest.mark.parametrize("fields", [
    {**LLAMA, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]},  # a family not counted here
    {k: v for k, v in QWEN3_MOE.items() if k != "num_experts"},  # transformers' default would decide
    {k: v for k, v in LLAMA.items() if k != "tie_word_embeddings"},  # transformers' default would decide
])
def test_anything_else_takes_transformers_path(tmp_path, fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    assert config_view.read_local(str(tmp_path)) is None
    model = resolve_model(ModelConfig(name_or_path=str(tmp_path)))
    assert model.built_hf_config is not None
    assert model.num_params == count_parameters(model.hf_config)
    assert architecture(model.config) == architecture(model.hf_config)


def test_overrides_are_checked_by_transformers():
    model = resolve_model(ModelConfig(preset="tiny-llama", overrides={"num_hidden_layers": 1}))
    assert model.built_hf_config is not None and model.config.num_hidden_layers == 1


@pytest.mark.engine
def test_plan_imports_no_engine():
    """--plan for a 70B model reads configs and does arithmetic: torch or transformers on this path would cost
    3 to 6 s of the 5 s `make plan-time` allows."""
    probe = ("import sys; from app.cli import main; "
             "code = main(['yamls/70b.yaml', '--plan', 'hardware.gpu=h100-sxm', 'hardware.num_gpus=8']); "
             "heavy = [m for m in ('torch', 'transformers', 'accelerate', 'vllm', 'deepspeed') if m in sys.modules];"
             "print('HEAVY', code, heavy)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "HEAVY 0 []" in proc.stdout, proc.stdout[-500:] + proc.stderr[-2000:]

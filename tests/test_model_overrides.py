"""`model.overrides` build the config the way a config.json holding the same fields would, and a modified
preset is never reported under the preset's bare name."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.model.spec import PRESETS_DIR, preset_names, resolve_model

SMALL_7B = {"num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4,
            "num_key_value_heads": 4}


def params_of_config_json(tmp_path, fields: dict) -> int:
    """Parameters of the model transformers builds from a config.json holding `fields`."""
    (tmp_path / "config.json").write_text(json.dumps(fields))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tmp_path))
    return sum(p.numel() for p in model.parameters())


def test_overrides_recompute_derived_fields(tmp_path):
    model = resolve_model(ModelConfig(preset="llama-2-7b", overrides=SMALL_7B))
    assert model.hf_config.head_dim == 64  # 256 / 4, not the preset's 4096 / 32 = 128
    preset_fields = json.loads((PRESETS_DIR / "llama-2-7b" / "config.json").read_text())
    assert model.num_params == params_of_config_json(tmp_path, {**preset_fields, **SMALL_7B})


def test_an_explicit_head_dim_override_is_kept():
    model = resolve_model(ModelConfig(preset="llama-2-7b", overrides={**SMALL_7B, "head_dim": 32}))
    assert model.hf_config.head_dim == 32
    assert "head dim 32" in model.label


@pytest.mark.parametrize("preset", preset_names())
def test_no_overrides_change_nothing(preset):
    model = resolve_model(ModelConfig(preset=preset))
    assert model.hf_config.to_dict() == AutoConfig.from_pretrained(PRESETS_DIR / preset).to_dict()
    assert model.label == preset and model.changes == {}


def test_a_modified_preset_is_labelled_with_its_changes():
    model = resolve_model(ModelConfig(preset="llama-2-7b", overrides=SMALL_7B))
    assert model.label == "llama-2-7b (modified: 4 layers, hidden 256, ffn 688, 4 heads, 4 KV heads)"
    assert model.name == "llama-2-7b"


def test_an_override_that_changes_nothing_is_not_a_modification():
    model = resolve_model(ModelConfig(preset="tiny-llama", overrides={"num_hidden_layers": 2}))
    assert model.label == "tiny-llama"


def test_unfamiliar_fields_are_named_as_written():
    model = resolve_model(ModelConfig(preset="mixtral-8x7b", overrides={"num_local_experts": 4, "rms_norm_eps": 1e-6}))
    assert model.label == "mixtral-8x7b (modified: 4 experts, rms_norm_eps 1e-06)"


def test_moe_overrides_reach_the_built_model():
    small = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
             "num_key_value_heads": 2}
    four = resolve_model(ModelConfig(preset="mixtral-8x7b", overrides={**small, "num_local_experts": 4}))
    two = resolve_model(ModelConfig(preset="mixtral-8x7b", overrides={**small, "num_local_experts": 2}))
    expert = 3 * 64 * 128  # gate, up and down projections of one expert in one layer
    assert four.num_params - two.num_params == 2 * expert + 2 * 64  # two more experts, two more router rows


def test_unknown_field_is_a_user_error():
    with pytest.raises(UserError, match=r"^model.overrides.num_layerz: not a field of LlamaConfig$"):
        resolve_model(ModelConfig(preset="tiny-llama", overrides={"num_layerz": 2}))

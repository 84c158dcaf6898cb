"""Planning reads config.json without transformers (harness/config_view.py): every field it reads and every
parameter it counts must be what transformers builds, for each preset and for the variants a config.json can
state (GQA, an explicit head_dim, biases, tied embeddings, experts); anything else takes transformers' path."""

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from harness import config_view
from harness.config import ModelConfig
from harness.models import PRESETS_DIR, architecture, count_parameters, preset_names, resolve_model
from tests.conftest import REPO

LLAMA = json.loads((PRESETS_DIR / "tiny-llama" / "config.json").read_text())
MIXTRAL = {**json.loads((PRESETS_DIR / "mixtral-8x7b" / "config.json").read_text()), "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_local_experts": 4, "vocab_size": 300}
MISTRAL = {**json.loads((PRESETS_DIR / "mistral-7b" / "config.json").read_text()), "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300}
VARIANTS = {
    "llama-biases": {**LLAMA, "attention_bias": True, "mlp_bias": True},
    "llama-tied-gqa": {**LLAMA, "tie_word_embeddings": True, "num_key_value_heads": 1},
    "llama-head-dim": {**LLAMA, "head_dim": 8},
    "mistral": MISTRAL,
    "mixtral": MIXTRAL,
}


def meta_parameters(hf_config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(hf_config).parameters())


def same_as_transformers(folder):
    view = config_view.read_local(str(folder))
    assert view is not None
    hf_config = AutoConfig.from_pretrained(folder)
    assert architecture(view) == architecture(hf_config)
    assert view.max_position_embeddings == hf_config.max_position_embeddings
    assert config_view.count_parameters(view) == meta_parameters(hf_config)


@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_reads_and_counts_as_transformers_builds_it(preset):
    same_as_transformers(PRESETS_DIR / preset)
    model = resolve_model(ModelConfig(preset=preset))
    assert model.built_hf_config is None  # nothing of transformers was needed
    hf_config = AutoConfig.from_pretrained(PRESETS_DIR / preset)
    ids = [getattr(hf_config, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id")]
    flat = [i for v in ids for i in (v if isinstance(v, list) else [v]) if i is not None]
    assert model.special_token_ids == frozenset(flat)
    assert model.hf_config.to_dict() == hf_config.to_dict()  # engines still get transformers' config


@pytest.mark.parametrize("variant", VARIANTS)
def test_variants_count_as_transformers_builds_them(tmp_path, variant):
    (tmp_path / "config.json").write_text(json.dumps(VARIANTS[variant]))
    same_as_transformers(tmp_path)


@pytest.mark.parametrize("fields", [
    {**LLAMA, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]},  # a family not counted here
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


def test_plan_imports_no_engine():
    """--plan for a 70B model reads configs and does arithmetic: torch or transformers on this path would cost
    3 to 6 s of the 5 s `make plan-time` allows."""
    probe = ("import sys; from harness.cli import main; "
             "code = main(['yamls/70b.yaml', '--plan', 'hardware.gpu=h100-sxm', 'hardware.num_gpus=8']); "
             "heavy = [m for m in ('torch', 'transformers', 'accelerate', 'vllm', 'deepspeed') if m in sys.modules];"
             "print('HEAVY', code, heavy)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "HEAVY 0 []" in proc.stdout, proc.stdout[-500:] + proc.stderr[-2000:]

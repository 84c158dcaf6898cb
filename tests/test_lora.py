"""LoRA adapters without a server: the mix each stream draws, the adapters made for a model, the server command's
placeholders (docs/measurement.md, "LoRA adapters"). Against vLLM serving them: tests/test_lora_server.py."""

import json
from collections import Counter

import numpy as np
import pytest
from safetensors import safe_open

from backends.openai_compat.command import expand
from backends.openai_compat.lora import made_modules, server_env
from harness.config.engine import LoraConfig
from harness.config.sections import ModelConfig
from harness.errors import UserError
from harness.model.adapters import lora_layers, write_adapters
from harness.model.spec import resolve_model
from harness.scenarios.adapter_mix import draw_adapters, mix_weights, with_adapters
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec

TINY = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))


def test_a_zipf_mix_puts_most_requests_on_the_first_adapters_and_repeats_exactly():
    assert mix_weights(4, "uniform").tolist() == [0.25] * 4
    zipf = mix_weights(4, "zipf", 1.0)
    assert zipf == pytest.approx(np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    drawn = draw_adapters(4000, 4, "zipf", 1.0, seed=0)
    shares = [Counter(drawn)[k] / 4000 for k in range(4)]
    assert shares == pytest.approx(zipf.tolist(), abs=0.03)
    assert drawn == draw_adapters(4000, 4, "zipf", 1.0, seed=0)  # every engine and rate offered the same
    assert drawn != draw_adapters(4000, 4, "zipf", 1.0, seed=1)
    steeper = Counter(draw_adapters(4000, 4, "zipf", 2.0, seed=0))[0] / 4000
    assert steeper > shares[0] + 0.1


def test_a_stream_with_a_lora_section_names_an_adapter_per_request():
    stream = StreamSpec(BatchSpec([[1, 2]] * 6, (4,) * 6), (0.0,) * 6)
    assert with_adapters(stream, None) is stream
    named = with_adapters(stream, LoraConfig(adapters=3, mix="uniform", seed=5))
    assert named.adapters == tuple(f"lora-{k}" for k in draw_adapters(6, 3, "uniform", 1.0, 5))
    assert named.requests is stream.requests


def test_adapters_are_written_in_pefts_format_with_weights_of_their_own(tmp_path):
    lora = LoraConfig(adapters=2, rank=4, target_modules=["q_proj", "down_proj"], seed=3)
    made = write_adapters(TINY, lora, tmp_path, ["lora-0", "lora-1"])
    assert [(name, path.name) for name, path in made] == [("lora-0", "lora-0"), ("lora-1", "lora-1")]
    config = json.loads((tmp_path / "lora-0" / "adapter_config.json").read_text())
    assert (config["peft_type"], config["r"], config["target_modules"]) == ("LORA", 4, ["down_proj", "q_proj"])
    hf = TINY.hf_config
    tensors = {}
    for name, _ in made:
        with safe_open(str(tmp_path / name / "adapter_model.safetensors"), "pt") as f:
            tensors[name] = {k: f.get_tensor(k) for k in f.keys()}
    first = tensors["lora-0"]
    assert len(first) == 2 * 2 * hf.num_hidden_layers  # A and B of two layers in every block
    a = first["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
    b = first["base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"]
    assert tuple(a.shape) == (4, hf.hidden_size) and tuple(b.shape) == (hf.hidden_size, 4)
    assert float(b.abs().max()) > 0  # not PEFT's zero B: an adapter that changes nothing could be skipped
    assert not first[next(iter(first))].equal(tensors["lora-1"][next(iter(first))])


def test_a_target_module_the_model_lacks_is_one_line():
    with pytest.raises(UserError, match=r"^backends\[0\].lora.target_modules: qkv_proj is no linear layer of "
                                        r"tiny-llama \(its layers: q_proj, k_proj, v_proj, o_proj, gate_proj"):
        lora_layers(TINY, LoraConfig(target_modules=["q_proj", "qkv_proj"]), "backends[0].lora")


def test_the_command_loads_what_the_harness_made(tmp_path):
    values = {"{port}": "8000"}
    modules = made_modules(TINY, LoraConfig(adapters=2, rank=8), tmp_path, values)
    assert modules == [f"lora-0={tmp_path / 'lora-0'}", f"lora-1={tmp_path / 'lora-1'}"]
    words = "serve --port {port} --max-loras {lora_adapters} --max-lora-rank {lora_rank} --lora-modules " \
            "{lora_modules} --x".split()
    assert expand(words, values, modules) == ["serve", "--port", "8000", "--max-loras", "2", "--max-lora-rank", "8",
                                              "--lora-modules", *modules, "--x"]
    assert made_modules(TINY, None, tmp_path / "none", {}) == [] and not (tmp_path / "none").exists()


def test_adapters_loaded_on_demand_are_left_for_vllms_resolver_to_find(tmp_path):
    values = {"{port}": "8000", "{model_dir}": "/tmp/served-model"}
    lora = LoraConfig(adapters=2, rank=8, load="on_demand")
    assert made_modules(TINY, lora, tmp_path, values) == []  # no --lora-modules words
    config = json.loads((tmp_path / "lora-1" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "/tmp/served-model"  # the resolver loads only the server's model's
    env = server_env(lora, tmp_path, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
                   "VLLM_LORA_RESOLVER_CACHE_DIR": str(tmp_path)}
    at_start = LoraConfig(adapters=2)
    assert server_env(at_start, tmp_path, None) is None and server_env(None, tmp_path, {"A": "1"}) == {"A": "1"}

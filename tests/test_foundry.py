"""llm-foundry inference-benchmark YAMLs run unchanged: translated (app/foundry/), printed, then run.

The fixtures in tests/fixtures/foundry/ are written in the shapes of llm-foundry's
scripts/inference/benchmarking/yamls: an inline MPT (1b.yaml), 7b.yaml's ffn_config with DeepSpeed, an
hf_causal_lm model, and a tiny inline MPT that sweeps on the CPU in seconds.
"""

import copy
import csv
import dataclasses
from pathlib import Path

import pytest
import yaml

from app import foundry
from app.foundry.translate import FOUNDRY_KEYS
from backends.registry import BACKENDS
from harness.config.loading import read_yaml_mapping
from harness.config.sweep import SweepYaml, load_config
from harness.errors import UserError
from tests.conftest import REPO, run_benchmark
from workloads.registry import WORKLOADS

FIXTURES = REPO / "tests" / "fixtures" / "foundry"
MPT_1B, HF_7B, DEEPSPEED_7B, TINY = (FIXTURES / f"{n}.yaml" for n in ("mpt-1b", "hf-7b", "deepspeed-7b", "tiny-mpt"))


def raw(path: Path) -> dict:
    return read_yaml_mapping(path)


def translated(path: Path) -> dict:
    return foundry.translate(raw(path), path.name)[0]


def lines_of(path: Path) -> list:
    return foundry.translate(raw(path), path.name)[1]


# ---- translation ----

def test_inline_mpt_becomes_the_mpt_preset_with_its_fields_as_overrides():
    assert translated(MPT_1B) == {
        "benchmark_name": "mpt-1b",  # absent: the file's stem
        "model": {"preset": "mpt-7b", "weights": "random", "dtype": "bf16",
                  "overrides": {"d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4,
                                "max_seq_len": 2048, "vocab_size": 50368}},  # max_seq_len: ${max_seq_len}, resolved
        "backends": [{"name": "hf", "device": "auto", "attn_implementation": "eager"}],
        "batch_sizes": [1, 2, 4, 8, 16, 32, 64], "input_lengths": [128], "output_lengths": [8],
        "num_batches": 5, "num_warmup_batches": 3,
    }


def test_hf_causal_lm_becomes_name_or_path_with_random_weights():
    assert translated(HF_7B) == {
        "benchmark_name": "hf-mpt-7b",
        "model": {"name_or_path": "mosaicml/mpt-7b", "weights": "random", "dtype": "fp16",  # model_dtype: float16
                  "overrides": {"max_seq_len": 4096}},  # config_overrides, interpolation resolved
        "backends": [{"name": "hf", "device": "cuda"}],
        "batch_sizes": [1, 8], "input_lengths": [512], "output_lengths": [64], "num_batches": 3,
        "num_warmup_batches": 1, "seed": 17,
    }


def test_use_deepspeed_becomes_a_deepspeed_entry_and_ffn_config_the_expansion_ratio():
    out = translated(DEEPSPEED_7B)
    assert out["backends"] == [{"name": "deepspeed", "device": "auto", "attn_implementation": "eager"}]
    assert out["benchmark_name"] == "MosaicDeepspeed_2xA100-bf16-GPT-7B"
    assert out["model"]["overrides"] == {"d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4,
                                         "max_seq_len": 2048, "vocab_size": 50432}


def test_absent_mpt_fields_take_llm_foundrys_defaults_and_mapped_extras_are_overrides():
    conf = raw(TINY)
    for key in ("d_model", "vocab_size"):
        del conf["model"][key]
    conf["model"].update(norm_eps=1e-6, attn_config={"attn_impl": "flash", "clip_qkv": 6, "alibi": True})
    out, lines = foundry.translate(conf, "x.yaml")
    overrides = out["model"]["overrides"]
    assert (overrides["d_model"], overrides["vocab_size"]) == (2048, 50368)
    assert overrides["layer_norm_epsilon"] == 1e-6 and overrides["attn_config"] == {"clip_qkv": 6}
    assert "model.vocab_size: absent -> model.overrides.vocab_size: 50368 (llm-foundry's MPTConfig default)" in lines
    assert any(line.startswith("model.attn_config.alibi: true -> dropped: transformers' MPT always applies ALiBi")
               for line in lines)


def test_the_preset_is_the_mpt_one_sharing_most_fields():
    conf = raw(TINY)
    conf["model"].update(d_model=7168, n_heads=64, n_layers=48, max_seq_len=8192, vocab_size=50432)
    assert foundry.translate(conf, "30b.yaml")[0]["model"]["preset"] == "mpt-30b"


@pytest.mark.parametrize("value, dtype", [("fp32", "fp32"), ("float32", "fp32"), ("bfloat16", "bf16"),
                                          ("torch.float16", "fp16")])
def test_model_dtype_names(value, dtype):
    conf = {**raw(TINY), "model_dtype": value}
    assert foundry.translate(conf, "t.yaml")[0]["model"]["dtype"] == dtype


def test_num_runs_and_warmup_false():
    conf = {**raw(TINY), "num_runs": 7, "warmup": False}
    del conf["num_batches"], conf["num_warmup_batches"]
    out = foundry.translate(conf, "t.yaml")[0]
    assert (out["num_batches"], out["num_warmup_batches"]) == (7, 0)


# ---- mapping lines ----

def test_one_line_per_key_saying_where_it_went_or_why_dropped():
    lines = lines_of(MPT_1B)
    for expected in (
        "benchmark_name: absent -> benchmark_name: mpt-1b (the YAML's file name)",
        "model.d_model: 2048 -> model.overrides.d_model",
        "model.max_seq_len: 2048 -> model.overrides.max_seq_len",
        "model_dtype: bf16 -> model.dtype: bf16",
        "device: null -> backends[0].device: auto (cuda when present, else cpu, as llm-foundry chose)",
        "batch_sizes: [1, 2, 4, 8, 16, 32, 64] -> batch_sizes",
        "use_cache: true -> dropped: every engine here decodes with its KV cache",
        "model.init_std: 0.02 -> dropped: weight initialisation: the harness draws its own random weights (timings do "
        "not depend on them)",
    ):
        assert expected in lines
    assert lines[1].startswith("model.name: mpt_causal_lm -> model.preset: mpt-7b, weights: random")
    assert any(line.startswith("model.attn_config.attn_impl: triton -> backends[0].attn_implementation: eager (")
               for line in lines)
    assert any(line.startswith("tokenizer: {name: EleutherAI/gpt-neox-20b, kwargs: {model_max_length: 2048}} -> "
                               "dropped: prompts are random token ids") for line in lines)
    # every key of the source, nested model keys included, has its line
    source = raw(MPT_1B)
    keys = [k for k in source if k != "model"] + [f"model.{k}" for k in source["model"] if k != "attn_config"]
    for key in keys:
        assert sum(line.startswith(f"{key}: ") for line in lines) == 1, key


def test_hf_lines_say_what_was_chosen_for_pretrained():
    lines = lines_of(HF_7B)
    assert any(line.startswith("model.pretrained: true -> model.weights: random (timings do not depend on weight "
                               "values") and "model.weights=pretrained" in line for line in lines)
    assert "autocast_precision: fp16 -> dropped: autocast to the weights' own dtype changes nothing" in lines
    assert "warmup: true -> dropped: the harness warms up with num_warmup_batches untimed batches per point" in lines


# ---- detection ----

def test_detection():
    assert all(foundry.is_foundry(raw(p)) for p in (MPT_1B, HF_7B, DEEPSPEED_7B, TINY))
    harness_yaml = raw(REPO / "yamls" / "cpu-tiny.yaml")
    assert not foundry.is_foundry(harness_yaml)
    assert not foundry.is_foundry({**harness_yaml, "device": "cpu"})  # a harness YAML keeps the harness's own error
    ours = {f.name for f in dataclasses.fields(SweepYaml)}
    assert not ours & set(FOUNDRY_KEYS)


# ---- what cannot be mapped: one line naming the key ----

def _with(path: Path, change) -> dict:
    conf = copy.deepcopy(raw(path))
    change(conf)
    return conf


ERRORS = {
    "no KV cache": (TINY, lambda c: c.update(use_cache=False), "use_cache: false cannot be honoured: every engine "
                    "here decodes with its KV cache (allowed: true)"),
    "unknown model": (TINY, lambda c: c["model"].update(name="hf_t5"), "model.name: 'hf_t5' is not a model this "
                      "harness can build from llm-foundry's YAML (allowed: mpt_causal_lm, hf_causal_lm)"),
    "device": (TINY, lambda c: c.update(device="cuda:1"), "device: cuda:1 cannot be honoured (allowed: null, cpu, cuda, "
               "cuda:0; for another GPU set CUDA_VISIBLE_DEVICES)"),
    "field MptConfig lacks": (TINY, lambda c: c["model"].update(foo=1), "model.foo: not a field transformers' "
                              "MptConfig builds (llm-foundry-only MPT option); remove it to run transformers' MPT"),
    "expansion ratio": (TINY, lambda c: c["model"].update(expansion_ratio=2), "model.expansion_ratio: 2 cannot be "
                        "built: transformers' MPT MLP is always 4 x d_model (allowed: 4)"),
    "no alibi": (TINY, lambda c: c["model"].update(attn_config={"alibi": False}), "model.attn_config.alibi: false "
                 "cannot be honoured: transformers' MPT always applies ALiBi (allowed: true)"),
    "grouped-query": (TINY, lambda c: c["model"].update(attn_config={"attn_type": "grouped_query_attention"}),
                      "model.attn_config.attn_type: grouped_query_attention cannot be honoured: transformers' "
                      "MptAttention is multi-head only (allowed: multihead_attention)"),
    "glu": (TINY, lambda c: c["model"].update(ffn_config={"ffn_type": "mptglu"}), "model.ffn_config.ffn_type: mptglu "
            "cannot be honoured: transformers' MptMLP is that MLP (allowed: mptmlp)"),
    "autocast": (TINY, lambda c: c.update(autocast_dtype="bf16"), "autocast_dtype: bf16 with model_dtype fp32: "
                 "mixed-precision autocast has no equivalent here (allowed: null or fp32); set model_dtype to the "
                 "dtype to compute in"),
    "dtype": (TINY, lambda c: c.update(model_dtype="fp8"), "model_dtype: fp8 is not one of fp32, fp16, bf16 (or "
              "torch's float32, float16, bfloat16)"),
    "8-bit": (HF_7B, lambda c: c["model"].update(load_in_8bit=True), "model.load_in_8bit: true cannot be honoured: "
              "8-bit quantized weights are another model to measure (allowed: false)"),
    "no path": (HF_7B, lambda c: c["model"].pop("pretrained_model_name_or_path"), "model.pretrained_model_name_or_path:"
                " required with name: hf_causal_lm (a local model folder or hub id)"),
    "interpolation": (TINY, lambda c: c["model"].update(max_seq_len="${nope}"), "model.max_seq_len: cannot resolve "
                      "its interpolation"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_unmappable_keys_are_errors_naming_the_key(case):
    path, change, message = ERRORS[case]
    with pytest.raises(UserError) as e:
        foundry.translate(_with(path, change), path.name)
    assert str(e.value).startswith(message)


def test_unknown_top_level_key():
    with pytest.raises(UserError, match=r"^icl_tasks: not a key of llm-foundry's inference benchmark"):
        foundry.translate({**raw(TINY), "icl_tasks": []}, "t.yaml")


# ---- the CLI ----

@pytest.mark.engine
def test_translate_only_prints_a_harness_yaml_that_loads(tmp_path):
    proc = run_benchmark(MPT_1B, "--translate-only")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout) == translated(MPT_1B)
    assert "#   model.d_model: 2048 -> model.overrides.d_model" in proc.stdout.splitlines()  # the mapping, as comments
    mine = tmp_path / "mine.yaml"
    mine.write_text(proc.stdout)
    config = load_config(mine, [], BACKENDS, WORKLOADS)
    assert (config.model.preset, config.backends[0].name, config.backends[0].device) == ("mpt-7b", "hf", "auto")
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(p.name for p in FIXTURES.glob("[!.]*.yaml"))


@pytest.mark.engine
def test_unmappable_key_exits_2_with_one_line(tmp_path):
    theirs = tmp_path / "theirs.yaml"
    theirs.write_text(yaml.safe_dump(_with(TINY, lambda c: c.update(use_cache=False))))
    proc = run_benchmark(theirs)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: use_cache: false cannot be honoured: every engine here decodes with "
                                        "its KV cache (allowed: true)"]
    assert proc.stdout == ""  # nothing printed, nothing run
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.yaml"]


@pytest.mark.parametrize("args, message", [
    ([TINY, "--translate-only", "batch_sizes=[1]"], "error: --translate-only: prints the file's translation, without "
     "key=value overrides (batch_sizes=[1]); give them when running the translated YAML"),
    (["yamls/cpu-tiny.yaml", "--translate-only"], "error: --translate-only: yamls/cpu-tiny.yaml is not an "
     "llm-foundry inference-benchmark YAML"),
])
def test_translate_only_misuse(args, message, capsys):
    from app.cli import main

    assert main([str(a) for a in args]) == 2
    assert capsys.readouterr().err.startswith(message)


@pytest.mark.engine
def test_a_tiny_inline_mpt_runs_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    proc = run_benchmark(TINY, "batch_sizes=[1]", "--output-dir", out, "--no-plots", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "#   use_deepspeed: false -> backends[0].name: hf" in proc.stderr  # the translation, printed first
    assert "# Translated from" not in proc.stdout  # stdout: the run's own output only
    with open(out / "results.csv") as f:
        results = list(csv.DictReader(f))
    assert [(r["backend"], r["batch_size"], r["input_length"], r["output_length"], r["status"]) for r in results] == \
        [("hf", "1", "16", "4", "ok")]  # batch_sizes=[1] applied to the translation
    assert results[0]["model"].startswith("mpt-7b (modified: ") and results[0]["dtype"] == "fp32"
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["model"]["overrides"]["n_layers"] == 2 and resolved["benchmark_name"] == "tiny-mpt"
    assert not list(FIXTURES.glob(".*"))  # nothing written beside the original: the translation is loaded as is

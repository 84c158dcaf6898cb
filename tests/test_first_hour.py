"""What a newcomer meets in the first hour: their own model through a shipped YAML, a config.json the harness
cannot size, `--plan` on a machine without the GPU, and a CLI that suggests the right key, name or command.
Each message is checked line for line: it is the interface."""

import json
import subprocess
import sys

import pytest

from app.cli import main
from app.plan_output import no_gpu_hint
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.model.spec import resolve_model
from plots.__main__ import main as plots_main
from tests.conftest import REPO
from workloads.registry import WORKLOADS

TINY = "yamls/cpu-tiny.yaml"
KNOWN = ", ".join(BACKENDS.names())
# Real config.json fields (from the public model cards), cut to what decides the sizes.
QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
        "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064,
        "max_position_embeddings": 32768, "tie_word_embeddings": False, "rms_norm_eps": 1e-06,
        "bos_token_id": 151643, "eos_token_id": 151645}
SIZED_ELSEWHERE = {  # configs missing fields only their family's config class defaults
    "bloom": {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_embed": 14336, "n_head": 112,
              "n_layer": 70, "vocab_size": 250880},
    "falcon": {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 4544,
               "num_attention_heads": 71, "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True},
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
             "n_positions": 1024, "vocab_size": 50257},
}


def model_folder(tmp_path, fields: dict):
    """A folder holding only a config.json, as a user has before downloading weights."""
    folder = tmp_path / fields["model_type"]
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(fields))
    return folder


def error_of(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1, err
    return err


# --- your own model ---------------------------------------------------------------------------------------------

def test_name_or_path_on_the_command_line_replaces_the_yamls_preset(tmp_path, capsys):
    folder = model_folder(tmp_path, QWEN)
    assert main([TINY, f"model.name_or_path={folder}", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"model: {folder} (qwen2, 7.6 B parameters, fp32, random weights)" in out


def test_a_preset_on_the_command_line_replaces_the_yamls_path(tmp_path):
    folder = model_folder(tmp_path, QWEN)
    yaml = tmp_path / "mine.yaml"
    yaml.write_text((REPO / TINY).read_text().replace("preset: tiny-llama", f"name_or_path: {folder}"))
    config = load_config(yaml, ["model.preset=tiny-llama"], BACKENDS, WORKLOADS)
    assert (config.model.preset, config.model.name_or_path) == ("tiny-llama", None)


def test_both_sources_on_the_command_line_are_still_refused(tmp_path, capsys):
    folder = model_folder(tmp_path, QWEN)
    err = error_of(capsys, TINY, f"model.name_or_path={folder}", "model.preset=tiny-llama", "--dry-run")
    assert err == "error: model: set model.preset or model.name_or_path, not both\n"


@pytest.mark.parametrize("family,size", [("bloom", "176.2 B"), ("falcon", "6.9 B"), ("gpt2", "124.4 M")])
def test_a_config_of_another_family_plans(tmp_path, capsys, family, size):
    """These configs, as their model cards publish them, once ended in a traceback (AttributeError, exit 1); they
    are read without transformers now (harness/model/families.py; the refusal of a config nobody can size is
    tests/test_model_families.py's)."""
    folder = model_folder(tmp_path, SIZED_ELSEWHERE[family])
    assert main([TINY, f"model.name_or_path={folder}", "--dry-run"]) == 0
    assert f"({family}, {size} parameters" in capsys.readouterr().out


def test_a_sizable_family_through_transformers_still_plans(tmp_path):
    """Gemma 2's config has every planned field: refusing BLOOM must not refuse it."""
    fields = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 2304,
              "intermediate_size": 9216, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
              "num_hidden_layers": 26, "vocab_size": 256000, "max_position_embeddings": 8192}
    model = resolve_model(load_config(TINY, [f"model.name_or_path={model_folder(tmp_path, fields)}"], BACKENDS,
                                      WORKLOADS).model)
    assert model.config.num_hidden_layers == 26 and model.num_params > 2e9


def test_plan_on_a_machine_without_the_gpus_ends_saying_how_to_name_one(capsys):
    assert main(["yamls/70b.yaml", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip("\n").splitlines()[-1] == no_gpu_hint()
    assert no_gpu_hint().startswith("This machine lacks those GPUs: plan for one you do not have by naming it, e.g. "
                                    "hardware.gpu=h100-sxm hardware.num_gpus=8 (hardware.gpu: ")
    assert main(["yamls/70b.yaml", "--plan", "hardware.gpu=h100-sxm", "hardware.num_gpus=8"]) == 0
    assert no_gpu_hint() not in capsys.readouterr().out


# --- did you mean -----------------------------------------------------------------------------------------------

SUGGESTIONS = {
    "top level": (["batch_size=[1,4]"], "batch_size: unknown key (allowed: {keys}); did you mean 'batch_sizes'?"),
    "a section": (["sampling.temprature=1"],
                  "sampling.temprature: unknown key (allowed: temperature, top_p, top_k, seed); did you mean "
                  "'temperature'?"),
    "a nested section": (["scenario=stream", "batch_sizes=null", "stream.slo.ttft=3"],
                         "stream.slo.ttft: unknown key (allowed: ttft_ms, tpot_ms, percentile); did you mean "
                         "'ttft_ms'?"),
    "a backend entry": (["backends.1.devce=cpu"], "backends[1].devce: unknown key (allowed: {vllm}); did you mean "
                        "'device'?"),
    "the workload": (["workload.promts=random"],
                     "workload.promts: unknown key (allowed: prompts, stop_at_eos, prefix); did you mean 'prompts'?"),
    "the workload's prefix": (["workload.prefix.num_prefix=2"],
                              "workload.prefix.num_prefix: unknown key (allowed: num_prefixes, prefix_tokens, text); "
                              "did you mean 'num_prefixes'?"),
    "speculative": (["backends.0.speculative.methd=ngram"],
                    "backends[0].speculative.methd: unknown key (allowed: method, num_speculative_tokens, "
                    "prompt_lookup_max, prompt_lookup_min, draft); did you mean 'method'?"),
    "model overrides": (["model.overrides.num_layers=2"],
                        "model.overrides.num_layers: not a field of LlamaConfig; did you mean 'num_hidden_layers'?"),
    "a backend name in another case": (["backends.1.name=VLLM"],
                                       f"backends[1].name: unknown backend 'VLLM' (known: {KNOWN}); did you mean "
                                       "'vllm'?"),
    "nothing close": (["colour=red"], "colour: unknown key (allowed: {keys})"),
}


@pytest.mark.parametrize("overrides,message", SUGGESTIONS.values(), ids=SUGGESTIONS.keys())
def test_an_unknown_name_gets_a_suggestion_at_every_level(capsys, overrides, message):
    from harness.config import schema
    from harness.config.sweep import SweepYaml

    keys = ", ".join(k.name for k in schema.keys(SweepYaml))
    vllm = ", ".join(k.name for k in schema.keys(BACKENDS.get("vllm", "").Options))
    err = error_of(capsys, TINY, *overrides, "--dry-run")
    assert err == f"error: {message.format(keys=keys, vllm=vllm)}\n"


def test_a_yaml_that_does_not_parse_says_why(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmark_name: t\nmodel:\n  preset: tiny-llama\n   dtype: fp32\n")
    err = error_of(capsys, str(bad))
    assert err == f"error: {bad}: not valid YAML at line 4, column 9: mapping values are not allowed here\n"


# --- help -------------------------------------------------------------------------------------------------------

def help_of(capsys, run, argv) -> str:
    with pytest.raises(SystemExit) as ended:
        run(argv)
    assert ended.value.code == 0
    return capsys.readouterr().out


def test_help_has_examples_exit_codes_and_the_schema(capsys):
    text = help_of(capsys, main, ["--help"])
    for line in ("examples:", "  python benchmark.py yamls/cpu-tiny.yaml", "exit codes:",
                 "  2    bad config, input or command line: one `error:` line naming the key",
                 "Every config key: python benchmark.py --schema [SECTION]."):
        assert line in text.splitlines() or any(row.startswith(line) for row in text.splitlines()), line


def test_help_groups_schedulers_and_nodes_apart(capsys):
    text = help_of(capsys, main, ["--help"])
    groups = {}
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = groups.setdefault(line[:-1], [])
        elif line.startswith("  --"):
            current.append(line.split()[0])
    assert groups["schedulers: MosaicML platform (--mcli) and Slurm (--slurm)"][:3] == ["--mcli", "--slurm",
                                                                                      "--submit"]
    assert groups["more than one node: the other nodes' agents"][0] == "--node-agent"
    assert "--slurm" not in groups["running a sweep"]


def test_plots_help_names_compare(capsys):
    text = help_of(capsys, plots_main, ["--help"])
    assert text.splitlines()[1].strip() == "python -m plots compare BASE NEW [options]   (see python -m plots " \
                                           "compare --help)"


@pytest.mark.engine
def test_an_interpreter_without_the_dependencies_gets_one_line():
    """`-S`: this interpreter without its site-packages, as a system Python without `make setup` is."""
    done = subprocess.run([sys.executable, "-S", str(REPO / "benchmark.py"), TINY], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    missing = done.stderr.split("has no module ")[1].split(":")[0]
    assert done.stderr == (f"error: {sys.executable} has no module {missing}: run the harness with the environment "
                           "`make setup` builds, e.g. .venv/bin/python benchmark.py yamls/cpu-tiny.yaml\n")

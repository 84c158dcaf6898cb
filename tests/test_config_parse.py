"""Loading a sweep parses it: one validated `SweepConfig` whose fields have their final types, built once, carrying
nothing but declared fields; its plain form (the manifest's config, a platform run's config.yaml) is the YAML's keys
and loads back to the same sweep."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from backends.registry import BACKENDS
from harness.config.sweep import EntryKeys, SweepConfig, SweepYaml, entry_key, load_config, spec_key, to_plain
from harness.errors import UserError
from workloads.random_ids import RandomOptions
from workloads.registry import WORKLOADS

SWEEP = {
    "benchmark_name": "parsed",
    "model": {"preset": "tiny-llama", "dtype": "fp32"},
    "backends": [
        {"name": "synthetic"},
        {"name": "hf", "device": "cpu",
         "speculative": [None, {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}]},
    ],
    "batch_sizes": 4,  # an integer: read as a list of one
    "input_lengths": [16],
    "output_lengths": [4],
    "num_batches": 3,
}


def load(tmp_path: Path, sweep: dict, *overrides: str) -> SweepConfig:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return load_config(path, list(overrides), BACKENDS, WORKLOADS)


def test_loading_gives_every_key_its_final_type(tmp_path):
    config = load(tmp_path, SWEEP)
    assert type(config) is SweepConfig
    assert config.batch_sizes == [4] and config.num_batches == 3 and config.output_lengths == [4]
    assert isinstance(config.workload, RandomOptions)
    assert [type(e) for e in config.backends] == [BACKENDS.get(n, "t").Options for n in ("synthetic", "hf", "hf")]
    assert [e.entry_label for e in config.backends] == ["synthetic", "hf", "hf-ngram3"]
    assert load(tmp_path, SWEEP, "batch_sizes=auto", "num_batches=auto").batch_sizes == "auto"


def test_each_entry_knows_where_it_is_in_the_yaml_without_an_undeclared_attribute(tmp_path):
    config = load(tmp_path, SWEEP)
    assert config.entry_keys == [EntryKeys("backends[0]", "backends[0].speculative"),
                                 EntryKeys("backends[1]", "backends[1].speculative[0]"),
                                 EntryKeys("backends[1]", "backends[1].speculative[1]")]
    assert [entry_key(config, i) for i in range(3)] == ["backends[0]", "backends[1]", "backends[1]"]
    assert spec_key(config, 2) == "backends[1].speculative[1]"
    for entry in config.backends:  # a dataclass's instance dict holds its fields, and here nothing else
        assert set(vars(entry)) == {f.name for f in dataclasses.fields(entry)}
    with pytest.raises(UserError, match=r"^backends\[1\]\.label: 'hf' is already used by backends\[0\]"):
        load(tmp_path, {**SWEEP, "backends": [{"name": "hf"}, {"name": "hf"}]})


def test_a_config_built_in_code_names_its_entries_by_index():
    config = SweepConfig(benchmark_name="t", output_lengths=[4], workload=RandomOptions(),
                         backends=[BACKENDS.get("synthetic", "t").Options(name="synthetic")])
    assert (entry_key(config, 0), spec_key(config, 0)) == ("backends[0]", "backends[0].speculative")


def test_the_plain_form_is_the_yamls_keys_and_loads_back_to_the_same_sweep(tmp_path):
    config = load(tmp_path, SWEEP)
    plain = to_plain(config)
    assert set(plain) == {f.name for f in dataclasses.fields(SweepYaml)} - {"models"}
    again = load(tmp_path, plain)
    assert to_plain(again) == plain and again.entry_keys[2].entry == "backends[2]"  # expanded: one entry each


@pytest.mark.parametrize("key, value, message", [
    ("batch_sizes", "[1, x]", "batch_sizes[1]: expected an integer, got 'x'"),
    ("batch_sizes", "{a: 1}", "batch_sizes: must be a list of positive integers or auto, got {'a': 1}"),
    ("num_batches", "0", "num_batches: must be an integer of at least 1, or auto, got 0"),
    ("output_lengths", "null", "output_lengths: required, e.g. output_lengths: [128]"),
])
def test_a_key_that_cannot_take_its_type_is_named(tmp_path, key, value, message):
    with pytest.raises(UserError) as refused:
        load(tmp_path, SWEEP, f"{key}={value}")
    assert str(refused.value) == message


def test_the_parsed_config_types_no_key_as_any():
    """`Any` is where OmegaConf cannot type a key (SweepYaml); the parsed config types every one."""
    import typing

    hints = typing.get_type_hints(SweepConfig)
    assert [name for name, hint in hints.items() if hint is typing.Any or typing.Any in typing.get_args(hint)] == []
    assert {n for n, h in typing.get_type_hints(SweepYaml).items() if h is typing.Any} == {
        "batch_sizes", "workload", "num_batches"}  # and each `backends` item: read by the registries

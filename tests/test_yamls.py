"""Every shipped YAML loads, validates and plans without loading a model (those that name a hub model, which
this machine cannot reach, validate their keys only)."""

from pathlib import Path

import pytest

from app.cli import models_of
from backends.registry import BACKENDS
from harness.config.sweep import load_config, model_sections
from harness.plan.sweep import plan_sweep
from workloads.registry import WORKLOADS

YAMLS = sorted((Path(__file__).resolve().parent.parent / "yamls").glob("*.yaml"))


def test_there_are_yamls():
    assert {"cpu-tiny.yaml", "cpu-prompts.yaml", "cpu-stream.yaml", "cpu-speculative.yaml", "7b.yaml", "7b-chat.yaml",
            "7b-speculative.yaml", "13b.yaml", "70b.yaml"} <= {p.name for p in YAMLS}


def needs_the_hub(model) -> bool:
    path = model.name_or_path
    return path is not None and not Path(path).exists()


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_yaml_validates_and_plans(path):
    config = load_config(path, [], BACKENDS, WORKLOADS)
    sections = [model for _, model in model_sections(config)]
    if any(needs_the_hub(model) for model in sections):
        assert all(model.weights == "pretrained" for model in sections) and "hub" in path.read_text()
        return
    plans = [plan for model, workload in models_of(config) for plan in plan_sweep(config, model, BACKENDS, workload)]
    assert len(plans) == len(sections) * len(config.backends)
    workload = plans[0].workload
    if config.scenario == "batch":
        loads = len(config.batch_sizes)
    else:
        rates = 1 if config.stream.arrival == "burst" or config.stream.request_rates == "auto" else len(
            config.stream.request_rates)
        loads = rates * len(config.stream.max_concurrency)
    expected = loads * len(workload.input_lengths()) * len(config.output_lengths)
    assert all(len(plan.points) == expected for plan in plans)


def test_70b_is_the_reference_sweep():
    config = load_config(YAMLS[0].parent / "70b.yaml", [], BACKENDS, WORKLOADS)
    assert config.model.dtype == "bf16"
    assert min(config.batch_sizes) == 1 and max(config.batch_sizes) == 64
    assert config.input_lengths == [128, 512, 2048]


def test_cpu_tiny_is_big_enough_to_be_a_demo():
    config = load_config(YAMLS[0].parent / "cpu-tiny.yaml", [], BACKENDS, WORKLOADS)
    assert len(config.batch_sizes) >= 3 and len(config.input_lengths) >= 2 and len(config.output_lengths) >= 2

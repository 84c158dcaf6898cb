"""hf, accelerate, deepspeed, vllm and deepspeed_zero on CUDA through benchmark.py (yamls/gpu-smoke.yaml), once per
GPU count: the results contract, the greedy-token cross-check, where peak memory comes from, NVML energy, CUDA graphs.
An engine that is not installed is skipped by the sweep, and its checks here say why.

Each test reads the results folder of the module's `sweep` fixture (conftest.py), which runs every engine once
per GPU count; the checks themselves are in smoke.py.
"""

import pytest

from tests.gpu.smoke import (
    LABELS,
    SPREAD,
    SWEEP_TIMEOUT_S,
    check_energy_columns,
    check_peak_memory_source_and_range,
    check_placement,
    check_results_contract,
    check_same_architecture,
    check_sweep_ran,
    check_token_crosscheck,
    check_vllm_cuda_graphs,
    needs_cuda,
    needs_engine,
    nvml_energy_or_skip,
)

# The first test to ask for a GPU count's sweep waits for it to run: the timeout covers that fixture's set-up.
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(SWEEP_TIMEOUT_S + 300)]


def test_sweep_ran_every_engine_on_the_device(sweep):
    check_sweep_ran(sweep)


@pytest.mark.parametrize("label", LABELS)
def test_results_contract(sweep, label):
    needs_engine(label)
    check_results_contract(sweep, label)


@pytest.mark.parametrize("label", tuple(SPREAD))
def test_engines_span_the_gpus_they_were_given(sweep, label):
    needs_engine(label)
    check_placement(sweep, label)


def test_every_engine_built_the_same_model(sweep):
    check_same_architecture(sweep)


def test_greedy_tokens_agree_with_hf(sweep):
    check_token_crosscheck(sweep)


@pytest.mark.parametrize("label", LABELS)
def test_peak_memory_comes_from_the_cuda_allocator(sweep, label):
    """vllm's is NVML's memory in use on its GPUs instead, by design: see check_peak_memory_source_and_range."""
    needs_cuda(sweep)
    needs_engine(label)
    check_peak_memory_source_and_range(sweep, label)


@pytest.mark.parametrize("label", LABELS)
def test_nvml_energy_columns_are_filled(sweep, label):
    needs_cuda(sweep)
    needs_engine(label)
    nvml_energy_or_skip(sweep.gpus)
    check_energy_columns(sweep, label)


def test_vllm_ran_with_cuda_graphs(sweep):
    needs_cuda(sweep)
    needs_engine("vllm")
    check_vllm_cuda_graphs(sweep)

"""`model.quantization` (docs/measurement.md, "Quantization"): entries per value, torchao's int8 and int4 weights on
the hf backend on CPU with their accuracy price against the unquantized entry, engines without a mapping skipped
with the reason, and the config checks (exit code 2)."""

import json
import os
import uuid
from pathlib import Path

import pytest

from app.cli import main
from tests.conftest import run_benchmark
from tests.contract import MARKER, processes_with, rows

# tiny-llama's linear layers (harness/presets/tiny-llama): per layer q, o 128x128; k, v 64x128; gate, up, down
# 344x128; two layers; the LM head 32000x128. The embedding is no linear layer: it stays fp32.
LINEAR_WEIGHTS = 2 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 344 * 128) + 32000 * 128
LINEAR_ROWS = 2 * (2 * 128 + 2 * 64 + 2 * 344 + 128) + 32000  # output channels: int8 keeps a scale for each


def sweep_yaml(folder: Path, quantization: str, backends: str = "{name: hf, device: cpu}") -> Path:
    path = folder / "sweep.yaml"
    path.write_text(f"""benchmark_name: quantization
model: {{preset: tiny-llama, weights: random, dtype: fp32, quantization: {quantization}}}
backends: [{backends}]
batch_sizes: [2]
input_lengths: [24]
output_lengths: [8]
num_batches: 2
num_warmup_batches: 1
""")
    return path


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    pytest.importorskip("torchao")
    folder = tmp_path_factory.mktemp("quantized")
    env = {**os.environ, MARKER: uuid.uuid4().hex}
    proc = run_benchmark(sweep_yaml(folder, "[none, int8, int4]"), "--output-dir", folder / "out", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert processes_with(env[MARKER]) == []
    return folder / "out"


def test_one_ok_row_per_quantization_with_its_tokens_per_second(quantized):
    results = rows(quantized / "results.csv")
    assert [(r["backend"], r["quantization"], r["status"]) for r in results] == [
        ("hf", "none", "ok"), ("hf-int8", "int8", "ok"), ("hf-int4", "int4", "ok")]
    assert all(float(r["throughput_tokens_per_s"]) > 0 for r in results)


def test_weight_bytes_are_the_quantized_layers_as_loaded(quantized):
    """int8 keeps a byte per linear weight and a 4-byte scale per output channel: the linear layers' fp32 bytes fall
    to a quarter. int4 on CPU (torchao's IntxWeightOnly) keeps each 4-bit value in a byte too, with a scale and a zero
    point per group of 32: a little more than int8, as loaded."""
    weights = {r["quantization"]: int(r["weight_bytes"]) for r in rows(quantized / "results.csv")}
    saved = weights["none"] - weights["int8"]
    assert saved == pytest.approx(3 * LINEAR_WEIGHTS - 4 * LINEAR_ROWS, rel=0.01)
    assert weights["int8"] < weights["int4"] < weights["none"]


def test_the_accuracy_price_against_the_unquantized_entry(quantized):
    results = {r["quantization"]: r for r in rows(quantized / "results.csv")}
    assert float(results["none"]["logits_rel_error"]) == 0 and float(results["none"]["top1_agreement"]) == 1
    int8, int4 = (float(results[q]["logits_rel_error"]) for q in ("int8", "int4"))
    assert 0 < int8 < 0.05 and int8 < int4 < 0.5
    for q in ("int8", "int4"):
        assert 0 < float(results[q]["top1_agreement"]) <= 1
    manifest = json.loads((quantized / "manifest.json").read_text())
    assert manifest["quantization_price"] == ("logits compared on each point's first inputs: hf-int4 with hf, "
                                              "hf-int8 with hf")


def test_an_engine_without_a_mapping_is_skipped_with_the_reason(tmp_path, capsys):
    path = sweep_yaml(tmp_path, "[none, int8]", "{name: vllm, device: cpu}")
    assert main([str(path), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "vllm-int8" in out and "quantization int8: vllm has no mapping in the harness (it has none here)" in out


@pytest.mark.parametrize("quantization, message", [
    ("int3", "model.quantization: unknown quantization 'int3' (known: none, int8, int4, fp8); did you mean 'int8'?"),
    ("[int8, int8]", "model.quantization: has duplicates: ['int8', 'int8']"),
    ("[]", "model.quantization: an empty list; give none, int8, int4 or fp8, or a list of them"),
])
def test_bad_quantization_exits_2_with_one_line(tmp_path, capsys, quantization, message):
    assert main([str(sweep_yaml(tmp_path, quantization)), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_models_must_ask_for_the_same_quantization(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text("""benchmark_name: q
models:
  - {preset: tiny-llama, quantization: [none, int8]}
  - {preset: llama-1b, quantization: none}
backends: [{name: hf, device: cpu}]
batch_sizes: [1]
input_lengths: [8]
output_lengths: [4]
""")
    assert main([str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == ("error: models[1].quantization: ['none'] differs from models[0]'s ['none', "
                                       "'int8']; quantization makes backend entries, which every model of the sweep "
                                       "shares\n")

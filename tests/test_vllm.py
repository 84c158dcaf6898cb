"""vLLM end to end through benchmark.py, beside an HF entry whose worker is made to crash.

One sweep serves every check (vLLM takes ~20 s to start on this CPU): the vLLM entry's CSV
contract and invariants, that a segfaulting worker costs only its own entry's rows, and that both
engines build the same model from a preset with overrides (which change the derived head_dim). A hung worker,
at a point or while loading, is the harness's to stop whatever the engine: those two run on the null engine
(backends/synthetic.py).
"""

import json

import pytest

from app.cli import main
from plots.report import make_report
from tests.contract import assert_invariants, processes_with, rows, run_marked, write_sweep

SWEEP = """
benchmark_name: vllm-e2e
model: {preset: tiny-llama, weights: random, dtype: fp32, overrides: {hidden_size: 256, intermediate_size: 688}}
backends:
  - {name: hf, device: cpu}
  - {name: vllm, enforce_eager: true, kv_cache_memory_bytes: 268435456}
batch_sizes: [1, 4, 8]
input_lengths: [16]
output_lengths: [1, 12]
num_batches: 3
num_warmup_batches: 1
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vllm")
    (tmp / "sweep.yaml").write_text(SWEEP)
    proc, marker = run_marked(tmp / "sweep.yaml", "--output-dir", tmp / "out", fault="segv@hf/0/4")
    return proc, tmp / "out", marker


@pytest.mark.engine
def test_crash_costs_only_the_crashed_entry(sweep):
    proc, out, marker = sweep
    assert proc.returncode == 1, proc.stderr  # a point errored
    hf = {(r["batch_size"], r["output_length"]): r for r in rows(out / "results.csv") if r["backend"] == "hf"}
    assert hf[("1", "1")]["status"] == "ok"
    assert hf[("4", "1")]["status"] == "error"
    assert hf[("4", "1")]["error"].startswith("worker died (SIGSEGV) during this point (log: ")
    for key in (("8", "1"), ("1", "12"), ("4", "12"), ("8", "12")):
        assert hf[key]["status"] == "error"
        assert hf[key]["error"].startswith("not run: the hf worker died (SIGSEGV) earlier")
    assert not processes_with(marker)


@pytest.mark.engine
def test_vllm_rows_contract_and_invariants(sweep):
    _, out, _ = sweep
    vllm = [r for r in rows(out / "results.csv") if r["backend"] == "vllm"]
    assert len(vllm) == 6
    samples = [s for s in rows(out / "samples.csv") if s["backend"] == "vllm"]
    for r in vllm:
        # batch TTFT waits for the batch's last first token: no single request can take longer
        batch_ttfts = [float(s["ttft_ms"]) for s in samples
                       if (s["batch_size"], s["output_length"]) == (r["batch_size"], r["output_length"])]
        assert r["status"] == "ok", r["error"]
        assert_invariants(r)
        assert int(r["kv_cache_capacity_tokens"]) > 0 and int(r["engine_kv_cache_bytes"]) > 0
        assert 0 < float(r["request_ttft_ms_p50"]) <= float(r["request_ttft_ms_p99"]) <= max(batch_ttfts) * 1.0001
        assert int(r["peak_memory_bytes"]) > 0


@pytest.mark.engine
def test_vllm_exact_output_lengths(sweep):
    _, out, _ = sweep
    samples = [s for s in rows(out / "samples.csv") if s["backend"] == "vllm"]
    assert len(samples) == 6 * 3
    assert all(s["min_output_tokens"] == s["output_length"] for s in samples)


@pytest.mark.engine
def test_vllm_runtime_in_manifest(sweep):
    _, out, _ = sweep
    entry = json.loads((out / "manifest.json").read_text())["backends"][1]
    assert entry["label"] == "vllm"
    runtime = entry["runtime"]
    assert runtime["kv_cache_capacity_tokens"] > 0 and runtime["cpu_threads_bind"] == "auto"
    # vLLM's default processes: the engine core apart, the model in its mp executor's worker (the CPU forces mp).
    assert (runtime["engine_core"], runtime["executor"]) == ("a process of its own", "mp")
    # What the engine's worker built, read back from it, not the "auto" it was given.
    impls = runtime["attention_impls_used"]
    assert isinstance(impls, list) and impls and all(name.endswith("Impl") for name in impls), impls
    assert (out / "logs" / "vllm.log").exists()


MODIFIED = "tiny-llama (modified: hidden 256, ffn 688)"


@pytest.mark.engine
def test_both_engines_built_the_overridden_architecture(sweep):
    _, out, _ = sweep
    manifest = json.loads((out / "manifest.json").read_text())
    hf, vllm = (entry["runtime"]["architecture"] for entry in manifest["backends"])
    assert hf == vllm == manifest["model"]["architecture"]
    assert hf["head_dim"] == 64  # 256 / 4 heads; the preset's 128 / 4 = 32 would mean a stale derived field
    assert manifest["model"]["overrides"] == {"hidden_size": 256, "intermediate_size": 688}


@pytest.mark.engine
def test_rows_and_charts_name_the_modified_model(sweep, tmp_path):
    _, out, _ = sweep
    assert {r["model"] for r in rows(out / "results.csv")} == {MODIFIED}
    assert {s["model"] for s in rows(out / "samples.csv")} == {MODIFIED}
    report = make_report([out], tmp_path / "plots").read_text()
    assert report.startswith(f"# {MODIFIED} (fp32): inference benchmark")
    titles = [line for line in report.splitlines() if line.startswith("![")]
    assert titles and all(MODIFIED in t for t in titles)


@pytest.mark.parametrize("override,message", [
    ("backends.0.engine_args={tensor_parallel_size: 2}",
     "backends[0].engine_args.tensor_parallel_size: duplicates backends[0].tp_size; set it there"),
    ("backends.0.engine_args={enforce_eager: true}",
     "backends[0].engine_args.enforce_eager: duplicates backends[0].enforce_eager; set it there"),
    ("backends.0.engine_args={load_format: auto}",
     "backends[0].engine_args.load_format: set by the harness (allowed: any other EngineArgs field)"),
    ("backends.0.multiprocessing=maybe", "backends[0].multiprocessing: expected true or false, got 'maybe'"),
    ("backends.0.multiprocessing=0", "backends[0].multiprocessing: expected true or false, got 0"),
])
def test_engine_args_duplicates_and_bad_options_are_config_errors(tmp_path, override, message, capsys):
    yaml = tmp_path / "v.yaml"
    yaml.write_text(SWEEP.replace("  - {name: hf, device: cpu}\n", ""))
    assert main([str(yaml), override, "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


@pytest.mark.engine
def test_a_hung_worker_is_killed_after_the_point_timeout(tmp_path):
    yaml = write_sweep(tmp_path / "h.yaml", "{name: synthetic}", batch_sizes="[1, 4, 8]", input_lengths="[16]")
    proc, marker = run_marked(yaml, "--output-dir", tmp_path / "out", "point_timeout_s=10", "output_lengths=[4]",
                              fault="hang@synthetic/0/8")
    assert proc.returncode == 1
    got = {r["batch_size"]: r for r in rows(tmp_path / "out" / "results.csv")}
    assert got["4"]["status"] == "ok"
    assert got["8"]["error"].startswith("worker timed out after 10 s (point_timeout_s) during this point")
    assert not processes_with(marker)


@pytest.mark.engine
def test_a_worker_stuck_loading_is_killed_after_the_load_timeout(tmp_path):
    yaml = write_sweep(tmp_path / "h.yaml", "{name: synthetic}", batch_sizes="[1, 4, 8]", input_lengths="[16]",
                       output_lengths="[1, 12]")
    proc, marker = run_marked(yaml, "--output-dir", tmp_path / "out", "load_timeout_s=5",
                              fault="hang@synthetic/0/load")
    assert proc.returncode == 1
    got = rows(tmp_path / "out" / "results.csv")
    assert len(got) == 6
    for r in got:
        assert r["status"] == "error"
        assert r["error"] == ("worker timed out after 5 s (load_timeout_s) while loading the model "
                              "(log: logs/synthetic.log)")
    assert not processes_with(marker)


@pytest.mark.parametrize("multiprocessing, env", [(True, "1"), (False, "0")])
def test_the_entrys_multiprocessing_holds_whatever_the_shell_exports(multiprocessing, env, monkeypatch):
    from backends.vllm_engine.engine import VLLMBackend
    from backends.vllm_engine.options import VLLMOptions

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1" if env == "0" else "0")
    options = VLLMOptions(name="vllm", device="cpu", multiprocessing=multiprocessing)
    placement = VLLMBackend.resolve_placement(options)
    assert VLLMBackend.launch_env(options, placement)["VLLM_ENABLE_V1_MULTIPROCESSING"] == env

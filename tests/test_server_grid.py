"""The `openai` backend's server flags as options (`server_args`, filling the command's `{NAME}` placeholders), so a
grid over them starts one server per value; and the prefix-cache reset it sends before each point (vLLM's
POST /reset_prefix_cache), against scripts/loopback_server.py on loopback, which has that route only when asked."""

import json
import os
import uuid

import numpy as np
import pytest

from app.cli import main
from backends.openai_compat import backend as backend_module
from backends.openai_compat import prefix_cache
from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
from backends.openai_compat.command import arg_values, fill, placeholders
from backends.registry import BACKENDS
from harness.config.sections import ModelConfig
from harness.config.sweep import load_config
from harness.errors import UserError
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from tests.conftest import REPO, run_benchmark
from tests.contract import MARKER, processes_with, rows
from workloads.registry import WORKLOADS

LOOPBACK = f"{{python}} {REPO / 'scripts' / 'loopback_server.py'} --port {{port}}"
GRIDDED = LOOPBACK + " --token-gap-ms {gap}"


def sweep_yaml(path, entry: str, rates="[4]"):
    path.write_text(f"""
benchmark_name: server-grid
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
scenario: stream
backends: [{entry}]
input_lengths: [16]
output_lengths: [4]
stream: {{arrival: constant, request_rates: {rates}, num_requests: 4, num_warmup_requests: 1, seed: 0}}
""")
    return path


def check(**options) -> None:
    OpenAIOptions(name="openai", **options).validate("backends[0]")


# --- config time ----------------------------------------------------------------------------------------------

def test_placeholders_and_server_args_must_match():
    check(command=GRIDDED, server_args={"gap": 0})
    cases = [
        ({"command": GRIDDED}, r"backends\[0\]\.command: \{gap\} is neither a placeholder the harness fills "
                               r"\(\{python\}, \{port\}, \{model_dir\}, \{checkpoint_dir\}, \{lora_modules\}, "
                               r"\{lora_adapters\}, \{lora_rank\}\) nor a key of "
                               r"backends\[0\]\.server_args$"),
        ({"command": LOOPBACK, "server_args": {"gap": 0}},
         r"backends\[0\]\.server_args\.gap: backends\[0\]\.command has no \{gap\}, so it would have no effect"),
        ({"command": LOOPBACK, "server_args": {"port": 1}}, r"backends\[0\]\.server_args\.port: \{port\} is filled "
                                                            "by the harness"),
        ({"base_url": "http://127.0.0.1:8000", "server_args": {"gap": 0}},
         r"backends\[0\]\.server_args: fills placeholders of backends\[0\]\.command; a running server \(base_url\)"),
    ]
    for options, message in cases:
        with pytest.raises(UserError, match=message) as e:
            check(**options)
        assert "\n" not in str(e.value)


def test_values_are_written_as_yaml_writes_them_word_by_word():
    values = arg_values({"eager": True, "chunked": False, "seqs": 16, "dtype": "fp8", "frac": 0.5, "none": None})
    assert values == {"{eager}": "true", "{chunked}": "false", "{seqs}": "16", "{dtype}": "fp8", "{frac}": "0.5",
                      "{none}": "null"}
    assert fill("--max-num-seqs={seqs}", values) == "--max-num-seqs=16"
    assert fill("/a dir/{dtype}", values) == "/a dir/fp8"  # one argument, spaces and all
    assert placeholders("{python} -c 'print({\"a\": 1})' --port {port} --x {seqs} --y {seqs}") == [
        "python", "port", "seqs"]  # JSON braces are not placeholders


def test_a_grid_over_server_args_is_one_entry_per_value(tmp_path):
    entry = f"{{name: openai, command: '{GRIDDED} --x {{x}}', grid: {{server_args.gap: [0, 20], server_args.x: [true]}}}}"
    config = load_config(sweep_yaml(tmp_path / "s.yaml", entry), [], BACKENDS, WORKLOADS)
    assert [(e.entry_label, e.server_args, e.grid_values) for e in config.backends] == [
        ("openai[server_args.gap=0]", {"gap": 0, "x": True}, {"server_args.gap": 0}),
        ("openai[server_args.gap=20]", {"gap": 20, "x": True}, {"server_args.gap": 20})]


@pytest.mark.parametrize("entry, message", [
    (f"{{name: openai, command: '{GRIDDED}', grid: {{server_args.gpa: [0, 20]}}}}",
     "backends[0].grid.server_args.gpa: backends[0].command has no {gpa}, so it would have no effect; put {gpa} "
     "where the value goes in the command, or remove it"),
    (f"{{name: openai, command: '{LOOPBACK}', grid: {{server_args.gap: [0, 20]}}}}",
     "backends[0].grid.server_args.gap: backends[0].command has no {gap}, so it would have no effect; put {gap} "
     "where the value goes in the command, or remove it"),
    ("{name: openai, base_url: 'http://127.0.0.1:1', grid: {server_args.gap: [0, 20]}}",
     "backends[0].server_args: fills placeholders of backends[0].command; a running server (base_url) takes none"),
])
def test_a_bad_server_grid_exits_2_with_one_line(tmp_path, capsys, entry, message):
    assert main([str(sweep_yaml(tmp_path / "s.yaml", entry)), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_a_vllm_command_starts_in_vllm_development_mode(monkeypatch, model):
    """So that POST /reset_prefix_cache exists; any other server's environment is the harness's own."""
    seen = []

    def refuse(argv, log_path, env=None):
        seen.append(env)
        raise RuntimeError("not started")
    monkeypatch.setattr(backend_module, "start_server", refuse)
    for command in ("vllm serve m --port {port}", LOOPBACK):
        backend = OpenAIBackend(OpenAIOptions(name="openai", command=command), model,
                                SweepShape(0, 64, 8, scenario="stream"))
        with pytest.raises(RuntimeError, match="not started"):
            backend.load()
    assert seen[0]["VLLM_SERVER_DEV_MODE"] == "1" and seen[0]["PATH"] == os.environ["PATH"] and seen[1] is None


# --- against the loopback server ------------------------------------------------------------------------------

def loopback(command: str) -> OpenAIBackend:
    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32"))
    options = OpenAIOptions(name="openai", command=command, request_timeout_s=5.0)
    options.validate("backends[0]")
    backend = OpenAIBackend(options, model, SweepShape(0, 64, 8, scenario="stream"))
    backend.load()
    return backend


def stream(n: int = 2) -> StreamSpec:
    prompts = np.random.default_rng(0).integers(3, 32000, size=(n, 8)).tolist()
    return StreamSpec(BatchSpec(prompts, (2,) * n), arrival_times("constant", 50.0, n, 0))


def resets(backend: OpenAIBackend) -> int:
    return int(backend._get_json("/stats")["resets"])


@pytest.mark.engine
def test_each_reset_after_requests_reaches_the_server_and_a_refusal_is_retried(monkeypatch):
    monkeypatch.setattr(prefix_cache, "RETRY_S", 0.01)
    backend = loopback(LOOPBACK + " --reset-endpoint --refuse-resets 2")
    try:
        assert backend.runtime_info()["prefix_cache_reset"] == "not asked for (keep_prefix_cache: true)"
        assert resets(backend) == 0  # nothing at load: the runner asks (then, and before each point)
        backend.reset_prefix_cache()  # refused twice, then done
        assert resets(backend) == 3
        assert backend.runtime_info()["prefix_cache_reset"] == f"POST {backend.base_url}/reset_prefix_cache"
        backend.reset_prefix_cache()  # nothing sent since: nothing to empty
        assert resets(backend) == 3
        assert all(r.ok for r in backend.serve(stream()).requests)
        backend.reset_prefix_cache()
        assert resets(backend) == 4
    finally:
        backend.close()


@pytest.mark.engine
def test_a_server_that_keeps_refusing_fails_in_one_line(monkeypatch):
    monkeypatch.setattr(prefix_cache, "RETRY_S", 0.01)
    backend = loopback(LOOPBACK + " --reset-endpoint --refuse-resets 100")
    try:
        with pytest.raises(RuntimeError, match=r"^the server refused to empty its prefix cache 5 times in "
                                               r"0\.05 s \(POST http://127\.0\.0\.1:\d+/reset_prefix_cache "
                                               r"answered success: false, blocks still held\)$"):
            backend.reset_prefix_cache()
    finally:
        backend.close()


def run_grid(tmp_path, entry: str, arg: str, values: list, marker: str, timeout_s: int):
    """`entry` (a YAML flow mapping) with grid server_args.ARG over `values`, swept through benchmark.py with the
    processes it starts marked; every entry's row ok, labelled by its value. Its results rows and runtimes."""
    entry = entry[:-1] + f", grid: {{server_args.{arg}: {values}}}}}"
    proc = run_benchmark(sweep_yaml(tmp_path / "s.yaml", entry), "--output-dir", tmp_path / "out", "--no-plots",
                         env={**os.environ, MARKER: marker}, timeout=timeout_s)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = rows(tmp_path / "out" / "results.csv")
    assert [(r["backend"], r["grid_options"], r["status"]) for r in results] == [
        (f"openai[server_args.{arg}={v}]", f"server_args.{arg}={v}", "ok") for v in values]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    return results, [b["runtime"] for b in manifest["backends"]]


@pytest.mark.engine
def test_a_grid_over_a_server_flag_starts_one_server_per_value(tmp_path):
    """Two labelled entries, each its own loopback server with its own --token-gap-ms (which its TPOT shows);
    the sink has no /reset_prefix_cache, which the manifest says, and the points run."""
    marker = uuid.uuid4().hex
    results, runtimes = run_grid(tmp_path, f"{{name: openai, command: '{GRIDDED}'}}", "gap", [0, 30], marker, 300)
    assert float(results[0]["tpot_ms_p50"]) < 20 <= float(results[1]["tpot_ms_p50"])
    assert [r["command"] for r in runtimes] == [GRIDDED] * 2
    assert [r["argv"][-2:] for r in runtimes] == [["--token-gap-ms", "0"], ["--token-gap-ms", "30"]]
    assert runtimes[0]["server_pid"] != runtimes[1]["server_pid"]
    for r in runtimes:
        assert r["prefix_cache_reset"] == f"not available: POST {r['base_url']}/reset_prefix_cache answered 404"
    assert processes_with(marker) == []


@pytest.mark.engine
def test_a_sweep_empties_the_cache_once_before_each_point(tmp_path):
    """Through benchmark.py: the runner's reset at load empties the fresh server's cache for the first point, then
    one reset before each later one (the server logs each); with keep_prefix_cache: true, none."""
    log = tmp_path / "resets.log"
    entry = f"{{name: openai, command: '{LOOPBACK} --reset-endpoint --reset-log {log}'}}"
    config = sweep_yaml(tmp_path / "s.yaml", entry, rates="[4, 8, 16]")
    proc = run_benchmark(config, "--output-dir", tmp_path / "out", "--no-plots", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["status"] for r in rows(tmp_path / "out" / "results.csv")] == ["ok"] * 3
    # each line: the completions requests that had arrived when the reset came (5 a point: 1 warm-up, 4 timed)
    assert log.read_text().split() == ["0", "5", "10"]
    runtime = json.loads((tmp_path / "out" / "manifest.json").read_text())["backends"][0]["runtime"]
    assert runtime["prefix_cache_reset"] == f"POST {runtime['base_url']}/reset_prefix_cache"
    log.unlink()
    proc = run_benchmark(config, "--output-dir", tmp_path / "kept", "--no-plots", "keep_prefix_cache=true",
                         timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not log.exists() or log.read_text().split() == []
    runtime = json.loads((tmp_path / "kept" / "manifest.json").read_text())["backends"][0]["runtime"]
    assert runtime["prefix_cache_reset"] == "not asked for (keep_prefix_cache: true)"


@pytest.mark.engine
def test_a_grid_over_vllm_serve_flags_restarts_the_server_per_entry(tmp_path):
    """The issue's case on this CPU: `vllm serve` (its OpenAI API server) started by the harness once per entry, each
    with its own --max-num-seqs on its command line (a process of its own), and each emptied its prefix cache
    through the development route the harness opened for it."""
    from tests.test_stream_e2e import SERVER

    marker = uuid.uuid4().hex
    # Each server's model in its engine core's process (VLLM_ENABLE_V1_MULTIPROCESSING=0): 7 s sooner a start here.
    command = f"env VLLM_ENABLE_V1_MULTIPROCESSING=0 {SERVER} --max-num-seqs {{seqs}}"
    _, runtimes = run_grid(tmp_path, f"{{name: openai, command: '{command}'}}", "seqs", [4, 8], marker, 600)
    assert [r["argv"][-2:] for r in runtimes] == [["--max-num-seqs", "4"], ["--max-num-seqs", "8"]]
    assert runtimes[0]["server_pid"] != runtimes[1]["server_pid"]
    assert all(r["prefix_cache_reset"] == f"POST {r['base_url']}/reset_prefix_cache" for r in runtimes)
    assert processes_with(marker) == []

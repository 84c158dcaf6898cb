"""`profile: true` (docs/measurement.md, "Profiler traces"): a batch point's first timed batch run once more, untimed,
under torch.profiler; its gzipped Chrome trace in profiles/, its path in results.csv's `profile_trace`. Engines
without a profiler (and streams) are refused at config time with one line, exit 2."""

import gzip
import json

import pytest

from app.cli import main
from harness.measure.columns.names import R, S
from tests.conftest import run_benchmark
from tests.contract import rows, write_sweep

ENTRIES = "{name: hf, device: cpu, label: bare}, {name: hf, device: cpu, label: traced, profile: true}"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two entries of one model: the same points, one of them profiled."""
    tmp = tmp_path_factory.mktemp("profile")
    yaml = write_sweep(tmp / "tiny.yaml", ENTRIES, batch_sizes="[1]", input_lengths="[8]", output_lengths="[8]",
                       num_batches=5, warmup=3)
    out = tmp / "out"
    proc = run_benchmark(yaml, "--output-dir", out, "--no-plots")
    assert proc.returncode == 0, proc.stderr
    return out, {r[R.backend]: r for r in rows(out / "results.csv")}


@pytest.mark.engine
def test_the_profiled_point_writes_a_trace_its_row_points_to(sweep):
    out, found = sweep
    path = found["traced"][R.profile_trace]
    assert path == "profiles/tiny-llama_traced_bs1_in8_out8.json.gz"
    trace = json.loads(gzip.decompress((out / path).read_bytes()))
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert "generate bs1 in8 out8" in names  # the span around the profiled batch
    assert any(n.startswith("aten::") for n in names)  # the forward's ops


@pytest.mark.engine
def test_an_unprofiled_entry_has_no_trace(sweep):
    out, found = sweep
    assert found["bare"][R.profile_trace] == ""
    assert [p.name for p in (out / "profiles").iterdir()] == ["tiny-llama_traced_bs1_in8_out8.json.gz"]


@pytest.mark.engine
def test_the_timed_figures_are_not_taken_under_the_profiler(sweep):
    out, found = sweep
    bare, traced = found["bare"], found["traced"]
    assert bare[R.num_batches] == traced[R.num_batches] == "5"
    # The same model and points in one sweep, each entry's fastest timed batch: within noise on a shared CPU (the
    # profiler slows every step far more), and the fastest is the batch least touched by other work on the machine.
    fastest = {label: min(float(s[S.tpot_ms]) for s in rows(out / "samples.csv") if s["backend"] == label)
               for label in ("bare", "traced")}
    assert 1 / 4 < fastest["traced"] / fastest["bare"] < 4, fastest
    samples = [s for s in rows(out / "samples.csv") if s["backend"] == "traced"]
    assert [s["batch_index"] for s in samples] == ["0", "1", "2", "3", "4"]  # the profiled batch is no sample


REFUSED = {
    "synthetic": ("{name: synthetic, profile: true}", "batch",
                  "backends[0].profile: synthetic has no profiler in the harness"),
    "openai": ("{name: openai, base_url: 'http://localhost:1', profile: true}", "batch",
               "backends[0].profile: openai sends requests to a server whose process the harness does not profile"),
    "vllm": ("{name: vllm, profile: true}", "batch", "backends[0].profile: vllm's profiler"),
    "a stream": ("{name: hf, profile: true}", "stream",
                 "backends[0].profile: traces one static batch per point (scenario: batch), not scenario: stream"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_an_engine_that_cannot_profile_is_refused(case, tmp_path, capsys):
    entry, scenario, message = REFUSED[case]
    yaml = write_sweep(tmp_path / "tiny.yaml", entry)
    extra = ["batch_sizes=null", "stream.request_rates=[1]"] if scenario == "stream" else []
    assert main([str(yaml), "--dry-run", f"scenario={scenario}", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err

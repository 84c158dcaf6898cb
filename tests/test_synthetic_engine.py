"""The null engine (`synthetic`, backends/synthetic.py): batches and streams answered on time with nothing loaded,
through the same runner, writers and report as any engine; and the checklist for a new engine shown true on it."""

import re
from pathlib import Path

import pytest

from app.cli import main
from backends.synthetic import SyntheticBackend, SyntheticOptions
from harness.plan.points import SweepShape
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from tests.conftest import REPO, run_benchmark
from tests.contract import rows

SOURCES = ("app", "backends", "benchmarks", "harness", "mosaic", "plots", "scripts", "slurm", "workloads")
NAMES_IT = re.compile(r"backends\.synthetic|SyntheticBackend|SyntheticOptions|[\"']synthetic[\"']")


def engine(model, **options):
    backend = SyntheticBackend(SyntheticOptions(name="synthetic", **options), model, SweepShape(4, 16, 8))
    backend.load()
    return backend


def test_every_sequence_gets_its_budget_no_sooner_than_the_times_set(model):
    timing = engine(model, ttft_ms=2.0, tpot_ms=1.0).run(BatchSpec([[1] * 16] * 3, (8, 8, 5)))
    assert timing.output_tokens == (8, 8, 5)
    assert timing.ttft_ms >= 2.0 and timing.latency_ms >= 2.0 + 7 * 1.0
    assert [len(t) for t in timing.token_ids] == [8, 8, 5]


def test_a_stream_comes_back_whole_and_in_order(model):
    requests = BatchSpec([[1] * 16] * 6, (4,) * 6)
    timing = engine(model).serve(StreamSpec(requests, arrival_times("poisson", 200.0, 6, 0)))
    assert [r.index for r in timing.requests] == list(range(6))
    assert all(r.ok and r.output_tokens == 4 and r.first_token_s - r.sent_s >= 1e-3 for r in timing.requests)


def test_a_negative_time_is_refused_in_one_line(capsys):
    assert main(["yamls/cpu-tiny.yaml", "backends=[{name: synthetic, tpot_ms: -1}]", "--dry-run"]) == 2
    assert capsys.readouterr().err == ("error: backends[0].tpot_ms: must be a finite number of ms in [0, 604800000], "
                                       "got -1\n")


def test_adding_an_engine_touches_its_file_and_its_registry_line_only():
    """docs/architecture.md, "Adding a plug-in": the engine's file, its line in backends/registry.py, its rows in
    docs/guides/engines.md and its tests. No other source names it: the manifest, the report, the CSVs and the
    checks take what they need from the engine class."""
    naming = sorted(str(p.relative_to(REPO)) for folder in SOURCES for p in (REPO / folder).rglob("*.py")
                    if NAMES_IT.search(p.read_text()))
    assert naming == ["backends/registry.py", "backends/synthetic.py"]
    assert "`synthetic`" in (REPO / "docs" / "guides" / "engines.md").read_text()


@pytest.mark.engine
def test_a_sweep_on_it_writes_every_file_in_seconds(tmp_path):
    config = tmp_path / "synthetic.yaml"
    config.write_text("benchmark_name: synthetic\nmodel: {preset: tiny-llama, dtype: fp32}\n"
                      "backends: [{name: synthetic, ttft_ms: 2, tpot_ms: 1}]\nbatch_sizes: [1, 4]\n"
                      "input_lengths: [16]\noutput_lengths: [8]\nnum_batches: 3\n")
    proc = run_benchmark(config, "--output-dir", tmp_path / "out", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = rows(tmp_path / "out" / "results.csv")
    assert [(r["batch_size"], r["status"]) for r in results] == [("1", "ok"), ("4", "ok")]
    for r in results:
        assert float(r["ttft_ms_mean"]) >= 2.0 and float(r["tpot_ms_mean"]) >= 1.0
        assert r["mbu"] == "" and r["peak_memory_bandwidth_gbps"] == ""  # it runs no model: no roofline
    assert len(rows(tmp_path / "out" / "samples.csv")) == 6
    assert Path(tmp_path / "out" / "plots" / "report.md").is_file()

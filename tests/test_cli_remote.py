"""The platform loop through benchmark.py itself: dry run, submit without a key, collect, log markers."""

import pytest
import yaml

from app.cli import main
from harness.measure import logmarkers
from mosaic import runs as mosaic
from tests.conftest import REPO, run_benchmark

TEMPLATES = ["--mcli", "mcli/h100-x8.yaml", "--mcli", "mcli/a100-80gb-x8.yaml"]


def test_dry_run_prints_one_run_per_template(capsys):
    assert main(["yamls/70b.yaml", *TEMPLATES]) == 0
    printed = capsys.readouterr()
    runs = [yaml.safe_load(doc) for doc in printed.out.split("---\n")]
    assert [r["parameters"]["benchmark_name"] for r in runs] == ["llama-2-70b-h100-x8", "llama-2-70b-a100-80gb-x8"]
    assert [r["compute"]["gpu_type"] for r in runs] == ["h100_80gb", "a100_80gb"]
    assert all(r["parameters"]["batch_sizes"] == [1, 2, 4, 8, 16, 32, 64] for r in runs)
    # Each run plans for its template's machine, and the dry run shows what fits there (on stderr: stdout is YAML).
    assert [(r["parameters"]["hardware"]["gpu"], r["parameters"]["hardware"]["num_gpus"]) for r in runs] == [
        ("h100-sxm", 8), ("a100-sxm-80gb", 8)]
    assert "on 8 x h100-sxm" in printed.err and "on 8 x a100-sxm-80gb" in printed.err


def test_submit_without_an_api_key_submits_nothing(monkeypatch, capsys):
    monkeypatch.delenv("MOSAICML_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(REPO / "tests" / "fixtures"))  # no ~/.mosaic config there
    monkeypatch.setattr("mcli.create_run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("submitted")))
    assert main(["yamls/70b.yaml", *TEMPLATES, "--submit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no MosaicML API key") and err.count("\n") == 1


def test_collect_rebuilds_a_results_folder(tmp_path, monkeypatch, capsys):
    log = (REPO / "tests" / "fixtures" / "mcli" / "tiny-cpu.log").read_text()
    monkeypatch.setattr(mosaic, "require_api_key", lambda: None)
    monkeypatch.setattr(mosaic, "fetch_log", lambda name: log)
    assert main(["--collect", "bench-tiny-cpu-a100", "--output-dir", str(tmp_path)]) == 0
    folder = tmp_path / "bench-tiny-cpu-a100"
    expected = REPO / "tests" / "fixtures" / "mcli" / "tiny-cpu"
    assert (folder / "results.csv").read_bytes() == (expected / "results.csv").read_bytes()
    assert "python -m plots" in capsys.readouterr().out


def test_collect_takes_no_config(capsys):
    assert main(["yamls/70b.yaml", "--collect", "run-a"]) == 2
    assert capsys.readouterr().err == ("error: --collect: takes run names or Slurm job ids only, no CONFIG, --mcli or "
                                       "--slurm\n")


@pytest.mark.engine
def test_emitted_markers_rebuild_the_files(tmp_path):
    proc = run_benchmark("yamls/cpu-tiny.yaml", "--output-dir", tmp_path / "out", "--no-plots",
                         "--emit-log-markers", "backends=[{name: synthetic}]", "batch_sizes=[1,2]",
                         "input_lengths=[16]", "output_lengths=[4]", "num_batches=2")
    assert proc.returncode == 0, proc.stderr
    files = logmarkers.parse(proc.stdout)
    for name in ("results.csv", "samples.csv", "manifest.json"):
        assert files[name] == (tmp_path / "out" / name).read_bytes().decode()

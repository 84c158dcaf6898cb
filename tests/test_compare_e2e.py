"""Two tiny runs: one with a fixed num_batches, one with num_batches: auto, compared with `python -m plots compare`;
a doctored copy 1.5x slower must fail the regression gate, the run against itself must pass it. On the null engine
(backends/synthetic.py): what is tested is the harness's statistics, stopping rule, manifest and compare, not an
engine's numbers (hf's runtime facts and time budget are held in tests/test_hf_e2e.py)."""

import csv
import json
import shutil
import subprocess
import sys

import pytest

from backends.registry import BACKENDS
from harness.config.sweep import load_config, to_plain
from harness.measure import stats
from plots.__main__ import main as plots_main
from tests.conftest import REPO, run_benchmark
from tests.contract import rows, write_sweep
from workloads.registry import WORKLOADS


def plots(*args):
    """`python -m plots ARGS` as a CI job runs it: a fresh process, its exit code and streams."""
    return subprocess.run([sys.executable, "-m", "plots", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def compare(capsys, *args):
    """The same command in this process (pandas and matplotlib imported once): (exit code, stdout, stderr)."""
    code = plots_main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ab")
    # Two entries; the second run keeps the first only.
    yaml = write_sweep(tmp / "ab.yaml", "{name: synthetic}, {name: synthetic, label: synthetic-b}",
                       batch_sizes="[1, 4]", input_lengths="[16]", output_lengths="[8]", num_batches=5)
    fixed = run_benchmark(yaml, "--output-dir", tmp / "a", "--no-plots")
    auto = run_benchmark(yaml, "--output-dir", tmp / "b", "--no-plots", "num_batches=auto", "stop.target_ci_pct=50",
                         "stop.min_batches=3", "stop.max_batches=6", "backends=[{name: synthetic}]")
    assert fixed.returncode == 0, fixed.stderr
    assert auto.returncode == 0, auto.stderr
    return tmp, auto


@pytest.mark.engine
def test_every_point_states_its_uncertainty(runs):
    tmp, _ = runs
    for r in rows(tmp / "a" / "results.csv"):
        assert float(r["latency_ms_ci95_low"]) < float(r["latency_ms_mean"]) < float(r["latency_ms_ci95_high"])
        assert float(r["throughput_tokens_per_s_ci95_low"]) < float(r["throughput_tokens_per_s_ci95_high"])
        assert float(r["latency_ms_cv"]) >= 0 and r["converged"] == "" and r["num_batches"] == "5"


@pytest.mark.engine
def test_auto_stops_once_the_interval_is_narrow_enough(runs):
    tmp, proc = runs
    for r in rows(tmp / "b" / "results.csv"):
        n = int(r["num_batches"])
        latencies = [float(s["latency_ms"]) for s in rows(tmp / "b" / "samples.csv")
                     if s["backend"] == r["backend"] and s["batch_size"] == r["batch_size"]]
        assert len(latencies) == n and 3 <= n <= 6
        narrow = [stats.within(stats.mean_interval(latencies[:k]), 50) for k in range(3, n + 1)]
        assert not any(narrow[:-1])  # it stopped at the first batch count whose interval was narrow enough
        assert r["converged"] == ("true" if narrow[-1] else "false")
        assert narrow[-1] or n == 6
    assert "±95%" in proc.stdout


@pytest.mark.engine
def test_two_runs_compare_point_by_point(runs, capsys):
    tmp, _ = runs
    code, out, _ = compare(capsys, tmp / "a", tmp / "b", "--out", tmp / "ab")
    assert code == 0
    report = (tmp / "ab" / "compare.md").read_text()
    assert "of 2 points slower by more than 5%" in report  # synthetic's two; synthetic-b ran in the first run only
    assert "| synthetic bs 1 in 16/out 8 | latency_ms_mean |" in report
    assert "- synthetic-b bs 4 in 16/out 8: base ok, new absent" in report
    assert (tmp / "ab" / "compare_latency_ms_mean.png").stat().st_size > 0
    gate = plots("compare", tmp / "a", tmp / "b", "--out", tmp / "ab", "--fail-on-regression")
    assert gate.returncode == (1 if "**slower**" in report else 0), gate.stderr


@pytest.mark.engine
def test_a_run_against_itself_passes_the_gate(runs, capsys):
    tmp, _ = runs
    code, out, _ = compare(capsys, tmp / "a", tmp / "a", "--out", tmp / "same", "--fail-on-regression")
    assert code == 0
    assert out.startswith("0 of 4 points slower by more than 5% on some metric; 0 faster")
    assert "**" not in (tmp / "same" / "compare.md").read_text().split("| point |")[1]


@pytest.mark.engine
def test_a_regression_fails_the_gate(runs, capsys):
    tmp, _ = runs
    # A shared CI box can make one of 5 batches several times slower, and then a real 1.5x change is rightly
    # not significant; the gate is tested on a steadied copy, where it must be.
    steady, slow = tmp / "steady", tmp / "slow"
    shutil.copytree(tmp / "a", steady)
    calm(steady / "samples.csv", ["latency_ms", "ttft_ms", "tpot_ms"])
    shutil.copytree(steady, slow)
    scale(slow / "samples.csv", {"latency_ms": 1.5, "ttft_ms": 1.5, "tpot_ms": 1.5})
    scale(slow / "results.csv", {"latency_ms_mean": 1.5, "ttft_ms_mean": 1.5, "tpot_ms_mean": 1.5,
                                 "throughput_tokens_per_s": 1 / 1.5})
    code, out, _ = compare(capsys, steady, slow, "--fail-on-regression", "--metric", "latency_ms_mean",
                           "--metric", "throughput_tokens_per_s")
    assert code == 1
    assert out.startswith("4 of 4 points slower by more than 5%")
    report = (slow / "compare" / "compare.md").read_text()
    assert report.count("**slower**") == 8 and "| 1.500 |" in report and "| 0.667 |" in report


@pytest.mark.engine
def test_two_entries_of_one_folder(runs, capsys):
    tmp, _ = runs
    code, out, _ = compare(capsys, tmp / "a", "--series", "synthetic", "synthetic-b")
    assert code == 0
    assert "of 2 points" in out
    assert "| bs 1 in 16/out 8 | latency_ms_mean |" in (tmp / "a" / "compare" / "compare.md").read_text()


@pytest.mark.engine
@pytest.mark.parametrize("args,message", [
    (["a"], "compare: pass BASE and NEW results folders (got 1), or one folder with --series BASE NEW"),
    (["a", "--series", "synthetic", "nope"], "--series nope: no backend entry of that label in"),
    (["a", "a", "--threshold", "-1"], "--threshold: must be a percentage of 0 or more, got -1.0"),
])
def test_bad_input_is_one_line(runs, capsys, args, message):
    tmp, _ = runs
    code, _, err = compare(capsys, *[tmp / a if a == "a" else a for a in args])
    assert code == 2
    assert err.startswith(f"error: {message}") and err.count("\n") == 1


def calm(path, columns, keep=0.05):
    """Shrink each point's batch-to-batch spread in `columns` to `keep` of itself, means unchanged."""
    table = read_table(path)
    points = {}
    for row in table:
        points.setdefault(tuple(row[k] for k in ("backend", "batch_size", "input_length", "output_length")),
                          []).append(row)
    for point in points.values():
        for column in columns:
            values = [float(r[column]) for r in point if r[column]]
            mean = sum(values) / len(values)
            for r in point:
                if r[column]:
                    r[column] = str(mean + (float(r[column]) - mean) * keep)
    write_table(path, table)


def scale(path, factors):
    table = read_table(path)
    for row in table:
        for column, factor in factors.items():
            if row[column]:
                row[column] = str(float(row[column]) * factor)
    write_table(path, table)


def read_table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_table(path, table):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


@pytest.mark.engine
def test_the_manifest_says_where_the_time_went(runs):
    tmp, proc = runs
    manifest = json.loads((tmp / "b" / "manifest.json").read_text())
    for entry in manifest["backends"]:
        budget = entry["runtime"]["time_budget_s"]
        parts = [v for k, v in budget.items() if k not in ("total_s", "overlap_s")]
        assert sum(parts) == pytest.approx(budget["total_s"])
        assert budget["timed_s"] > 0 and budget["load_s"] > 0 and budget["worker_start_s"] > 0
        assert budget["engine_import_s"] > 0 and budget["other_s"] >= -0.01
    sweep = manifest["time_budget_s"]
    assert sweep["wall_s"] > sweep["entries_s"] > sweep["work_s"] > 0
    assert sweep["wall_over_work"] == pytest.approx(sweep["wall_s"] / sweep["work_s"])
    assert "Time budget, seconds" in proc.stdout and f"{sweep['wall_over_work']:.2f}x" in proc.stdout


@pytest.mark.engine
def test_the_resolved_config_reruns_the_same_sweep(runs):
    tmp, _ = runs
    manifest = json.loads((tmp / "b" / "manifest.json").read_text())
    config = tmp / "b" / "config.yaml"
    assert f"python benchmark.py {config} --output-dir {tmp / 'b'}-rerun" in manifest["reproduce"]
    assert manifest["reproduce"].startswith(f"git checkout {manifest['git_commit'].removesuffix('-dirty')} && ")
    reloaded = load_config(config, [], BACKENDS, WORKLOADS)
    assert json.loads(json.dumps(to_plain(reloaded), default=str)) == manifest["config"]
    assert isinstance(manifest["backends"][0]["runtime"]["environment"], dict)

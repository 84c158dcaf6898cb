"""Consecutive entries overlap only where nothing is measured: the next worker starts and imports while the last
one closes its engine, and loads only once that one's process group has ended (harness/run/launcher.py, WorkerRun).
On the null engine (backends/synthetic.py): the overlap is the launcher's, whatever the engine."""

import json

import pytest

from harness.run.worker import SLOW_FAULT_S
from tests.contract import processes_with, rows, run_marked, write_sweep


@pytest.fixture(scope="module")
def slow_close(tmp_path_factory):
    """Two null-engine entries; the first takes SLOW_FAULT_S extra seconds to close its engine."""
    tmp = tmp_path_factory.mktemp("overlap")
    yaml = write_sweep(tmp / "two.yaml", "{name: synthetic}, {name: synthetic, label: synthetic-b}", batch_sizes="[1]",
                       input_lengths="[16]", output_lengths="[4]")
    proc, marker = run_marked(yaml, "--output-dir", tmp / "out", fault="slow@synthetic/0/close")
    return proc, tmp / "out", marker


@pytest.mark.engine
def test_the_next_entry_loads_only_after_the_last_one_has_ended(slow_close):
    proc, out, marker = slow_close
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in rows(out / "results.csv")] == ["ok", "ok"]
    manifest = json.loads((out / "manifest.json").read_text())
    first, second = (e["runtime"]["time_budget_s"] for e in manifest["backends"])
    assert first["shutdown_s"] >= SLOW_FAULT_S
    # The second worker was started at the first one's last result, and its gate opened when the first one's
    # group had ended: its overlap is the first one's shutdown.
    assert second["overlap_s"] == pytest.approx(first["shutdown_s"], abs=1.0)
    # Starting and importing took it part of that time; the rest it waited, loading nothing.
    started = second["worker_start_s"] + second["engine_import_s"]
    assert second["waiting_s"] == pytest.approx(max(0.0, second["overlap_s"] - started), abs=1.0)
    assert second["load_s"] > 0 and second["timed_s"] > 0
    assert not processes_with(marker)


@pytest.mark.engine
def test_the_overlap_counts_once_in_the_sweep(slow_close):
    _, out, _ = slow_close
    manifest = json.loads((out / "manifest.json").read_text())
    budgets = [e["runtime"]["time_budget_s"] for e in manifest["backends"]]
    for budget in budgets:
        parts = [v for k, v in budget.items() if k not in ("total_s", "overlap_s")]
        assert sum(parts) == pytest.approx(budget["total_s"])
    sweep = manifest["time_budget_s"]
    assert sweep["entries_overlap_s"] == pytest.approx(sum(b["overlap_s"] for b in budgets))
    assert sweep["entries_s"] == pytest.approx(sum(b["total_s"] for b in budgets) - sweep["entries_overlap_s"])
    assert sweep["wall_s"] > sweep["entries_s"]

"""The suite's budget line (scripts/test_times.py --budget-min, printed by `make test` at the end of every run, CI's
included): the time against the budget and what the engine tier started, from a record like the plugin's."""

import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "test_times.py"


def record(wall_s):
    test = {"setup_s": 1.0, "call_s": 2.0, "teardown_s": 0.0, "outcome": "passed"}
    return {"wall_s": wall_s, "fixtures": [],
            "tests": {"tests/test_a.py::test_engine": {**test, "engine": True, "starts": {"sweep": 1, "worker": 2}},
                      "tests/test_b.py::test_fast": {**test, "engine": False, "starts": {}}}}


def run(tmp_path, *args, wall_s=600.0):
    path = tmp_path / "times.json"
    path.write_text(json.dumps(record(wall_s)))
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *args], capture_output=True, text=True, timeout=60)


def test_the_budget_line_says_within_or_by_how_much_over(tmp_path):
    assert run(tmp_path, "--budget-min", "15").stdout.splitlines()[0] == (
        "Suite budget: pytest 10.0 min against 15 min: within; the engine tier started 1 sweep, 2 worker")
    over = run(tmp_path, "--budget-min", "15", wall_s=1968.0).stdout.splitlines()[0]
    assert over.startswith("Suite budget: pytest 32.8 min against 15 min: OVER by 17.8 min;")
    assert not run(tmp_path).stdout.startswith("Suite budget")  # make test-times: the tables alone


def test_a_budget_that_is_not_a_positive_finite_number_is_one_line(tmp_path):
    for bad in ("0", "-3", "nan", "inf", "soon"):
        proc = run(tmp_path, "--budget-min", bad)
        assert proc.returncode == 2 and "must be a finite number of minutes above 0" in proc.stderr, bad
        assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.json")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def test_every_file_run_alone_exists_and_says_why():
    """A renamed file would silently lose its `alone` mark and run beside another."""
    from tests.conftest import ALONE

    assert sorted(name for name in ALONE if not (REPO / "tests" / name).exists()) == []
    assert all(reason for reason in ALONE.values())


def test_the_timing_plugin_merges_its_xdist_workers_and_drops_an_earlier_runs_leftovers(tmp_path):
    """make test's fast phase runs under pytest-xdist: each worker writes its share, the controller merges them into
    one record (a broken merge would report a fast tier of no tests); a share left by a killed run is not merged."""
    out = tmp_path / "times.json"
    stale = {"setup_s": 0, "call_s": 9, "teardown_s": 0, "outcome": "passed", "starts": {}, "engine": False}
    (tmp_path / "times.json.gw7").write_text(json.dumps({"tests": {"stale::t": stale}, "fixtures": []}))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.suite_times", "--times-out", str(out), "-n", "2",
                           "-q", "-p", "no:cacheprovider", "tests/test_records.py"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    record = json.loads(out.read_text())
    assert record["tests"] and all(k.startswith("tests/test_records.py::") for k in record["tests"])
    assert all(t["outcome"] == "passed" and t["call_s"] >= 0 for t in record["tests"].values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["times.json"]

"""`make test-times`: where the suite's time goes, per test, per fixture and per file, with what each file starts.

A pytest plugin (`-p tests.suite_times`, off in a plain run) that records each test's setup, call and teardown
seconds, each fixture's setup seconds (the first test to ask for a module- or session-scoped fixture pays it), and
what every test starts: sweep processes (`benchmark.py`), engine workers (`harness.run.worker`, torchrun ranks),
servers (vLLM's and transformers' `serve`, the loopback server, Slurm daemons) and engines built in the test's own
process (a `backends.base.Backend` constructed). Processes that a test's own processes start (a sweep's workers,
their torchrun ranks, the servers they start) are counted too: a `sitecustomize` on the children's PYTHONPATH writes
each start to the running test's log, which the plugin reads when the test ends. At the end it writes `--times-out` (JSON, every record) and prints
the top of each table; `scripts/test_times.py` turns the JSON into the markdown tables a closing note quotes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import pytest

# What a process is, by its command line: the first kind whose words it contains (tests/conftest.py's ENGINE_COMMANDS
# decides the tier; these decide the count).
# A preloading process counts as a worker: the workers it forks start no interpreter, so they are not counted.
KINDS = (("sweep", ("benchmark.py",)), ("worker", ("harness.run.worker", "harness.run.preload", "harness.run.node_agent",
                                                   "torchrun")),
         ("server", ("serve", "loopback_server", "slurmctld", "slurmd", "sbatch")), ("other", ("",)))


def kind_of(argv) -> str:
    text = " ".join(str(a) for a in ([argv] if isinstance(argv, (str, bytes, Path)) else list(argv)))
    return next(kind for kind, words in KINDS if any(word in text for word in words))


class SuiteTimes:
    def __init__(self, out: Path):
        self.out = out
        self.tests: Dict[str, dict] = {}
        self.fixtures: List[dict] = []
        self.current: Optional[str] = None
        self.started = time.perf_counter()
        self.children_dir = tempfile.mkdtemp(prefix="suite-times-")

    def record(self, nodeid: str) -> dict:
        return self.tests.setdefault(nodeid, {"setup_s": 0.0, "call_s": 0.0, "teardown_s": 0.0,
                                              "outcome": "", "starts": Counter(), "engine": False})

    # --- what a test starts ------------------------------------------------------------------------------------

    def started_process(self, argv) -> None:
        if self.current is not None:
            self.record(self.current)["starts"][kind_of(argv)] += 1

    def built_engine(self) -> None:
        if self.current is not None:
            self.record(self.current)["starts"]["in-process engine"] += 1

    # --- pytest hooks ------------------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.current = item.nodeid
        entry = self.record(item.nodeid)
        entry["engine"] = item.get_closest_marker("engine") is not None
        log = Path(self.children_dir) / f"{len(self.tests)}.log"
        os.environ[CHILDREN_LOG] = str(log)
        try:
            return (yield)
        finally:
            self.current = None
            if log.exists():  # what the test's processes started in their turn
                entry["starts"].update(line for line in log.read_text().split("\n") if line)

    def pytest_runtest_logreport(self, report):
        entry = self.record(report.nodeid)
        entry[f"{report.when}_s"] += report.duration
        if report.when == "call" or report.outcome != "passed":
            entry["outcome"] = report.outcome

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            seconds = time.perf_counter() - start
            if seconds >= 0.05:
                self.fixtures.append({"fixture": fixturedef.argname, "scope": fixturedef.scope, "seconds": seconds,
                                      "test": request.node.nodeid})

    def pytest_sessionfinish(self, session):
        """One record for the run. Under pytest-xdist each worker writes its share beside `--times-out`, and the
        controller, which runs no test, merges them with its own wall time."""
        worker = getattr(session.config, "workerinput", None)
        tests = {k: {**v, "starts": dict(v["starts"])} for k, v in self.tests.items()}
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if worker is not None:
            part = self.out.with_name(f"{self.out.name}.{worker['workerid']}")
            part.write_text(json.dumps({"tests": tests, "fixtures": self.fixtures}) + "\n")
            return
        fixtures = list(self.fixtures)
        for part in sorted(self.out.parent.glob(f"{self.out.name}.gw*")):
            shared = json.loads(part.read_text())
            tests.update(shared["tests"])
            fixtures += shared["fixtures"]
            part.unlink()
        self.tests = {k: {**v, "starts": Counter(v["starts"])} for k, v in tests.items()}  # for the summary below
        self.out.write_text(json.dumps({"wall_s": time.perf_counter() - self.started, "tests": tests,
                                        "fixtures": fixtures}, indent=1) + "\n")

    def pytest_terminal_summary(self, terminalreporter):
        per_file: Dict[str, float] = defaultdict(float)
        for nodeid, t in self.tests.items():
            per_file[nodeid.split("::")[0]] += t["setup_s"] + t["call_s"] + t["teardown_s"]
        terminalreporter.write_sep("=", f"suite times (all of it in {self.out})")
        for name, seconds in sorted(per_file.items(), key=lambda kv: -kv[1])[:15]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {name}")


def pytest_addoption(parser):
    parser.addoption("--times-out", default="results/test-times.json",
                     help="with -p tests.suite_times: where the per-test record goes (JSON)")


# The environment variable naming the running test's log of processes its children start.
CHILDREN_LOG = "SUITE_TIMES_CHILDREN_LOG"
# Loaded by every Python child at start-up (it is on their PYTHONPATH): each process it starts, one kind a line.
SITECUSTOMIZE = """
import os, subprocess
_log = os.environ.get("SUITE_TIMES_CHILDREN_LOG")
if _log:
    _inner = subprocess.Popen.__init__
    def _counted(self, args, *rest, **kwargs):
        _inner(self, args, *rest, **kwargs)
        text = " ".join(str(a) for a in ([args] if isinstance(args, (str, bytes)) else list(args)))
        kinds = %r
        kind = next(k for k, words in kinds if any(w in text for w in words))
        with open(_log, "a") as f:
            f.write(kind + "\\n")
    subprocess.Popen.__init__ = _counted
"""


def pytest_configure(config):
    recorder = SuiteTimes(Path(config.getoption("--times-out")))
    config.pluginmanager.register(recorder, "suite_times_recorder")
    if not hasattr(config, "workerinput"):  # the controller: an earlier run's leftover worker shares are not this run's
        for part in recorder.out.parent.glob(f"{recorder.out.name}.gw*"):
            part.unlink()
    site = Path(recorder.children_dir) / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE % (KINDS,))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    _count_processes(recorder)
    _count_engines(recorder)


def _count_processes(recorder: SuiteTimes) -> None:
    """Every process the tests start, counted by kind (after tests/conftest.py's own guard has let it through)."""
    inner = subprocess.Popen.__init__

    def counted(self, args, *rest, **kwargs):
        inner(self, args, *rest, **kwargs)
        recorder.started_process(args)

    subprocess.Popen.__init__ = counted


def _count_engines(recorder: SuiteTimes) -> None:
    """Every engine a test builds in its own process: each backend's construction goes through Backend.__init__."""
    from backends.base import Backend

    inner = Backend.__init__

    def counted(self, *args, **kwargs):
        recorder.built_engine()
        inner(self, *args, **kwargs)

    Backend.__init__ = counted  # type: ignore[method-assign]

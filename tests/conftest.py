"""Shared by every test: the repository root, `run_benchmark` (a sweep as a user runs it), and the tiers.

The suite has two tiers. `make test-fast` runs the tests that start no engine, server or sweep process (`-m "not
engine"`, under 2 minutes here); `make test` runs everything. A test that starts one carries `@pytest.mark.engine`
(or its module's `pytestmark`); one that forgets fails on the process it tries to start, in either tier, so the
fast tier stays fast as tests are added.
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What in a command line makes it an engine, a server or a sweep: the CLI, a worker, ranks, the overhead and
# agreement benchmarks, a server, a venv being built.
ENGINE_COMMANDS = ("benchmark.py", "harness.run.worker", "harness.run.node_agent", "torchrun", "benchmarks/", "vllm",
                   "serve", "setup-venv.sh", "slurmctld", "slurmd", "sbatch")


@pytest.fixture(scope="module")
def model():
    """tiny-llama in fp32 with random weights: the model every test that builds an engine in process uses (one
    instance per test module: a ModelSpec caches what it builds)."""
    # Imported here: tests/test_tiers.py runs this conftest in a folder of its own, where harness is not importable.
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    return resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))


def run_benchmark(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    """`python benchmark.py ARGS` as a user runs it: a fresh process, real exit code and streams."""
    return subprocess.run([sys.executable, str(REPO / "benchmark.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def starts_engine(args) -> bool:
    argv = [args] if isinstance(args, (str, bytes, Path)) else list(args)
    text = " ".join(str(a) for a in argv)
    return any(word in text for word in ENGINE_COMMANDS)


def pytest_collection_modifyitems(items):
    """A GPU or Slurm test always starts engines: it is in the engine tier without saying so twice."""
    for item in items:
        if item.get_closest_marker("gpu") or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.engine)


_running = {"item": None}  # the test being set up, run or torn down: module fixtures start processes for it too


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _running["item"] = item
    try:
        return (yield)
    finally:
        _running["item"] = None


_real_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *rest, **kwargs):
    """Refuse an engine, server or sweep process to a test not marked `engine` (see the module's docstring)."""
    item = _running["item"]
    if item is not None and item.get_closest_marker("engine") is None and starts_engine(args):
        raise AssertionError(f"{item.nodeid} starts {' '.join(map(str, args))[:200]!r}: mark it @pytest.mark.engine "
                             "(tests/conftest.py), or make test-fast would run it")
    _real_popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _guarded_popen_init

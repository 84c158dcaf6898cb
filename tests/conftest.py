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


# The files `make test` runs with nothing beside them (`-m "engine or alone"`, after the rest of the fast tier ran two
# at a time under pytest-xdist): each asserts on time or on what the machine shares, which a test on the other core
# would move. The engine tier runs one test at a time anyway: its engines bind threads to every core.
ALONE = {
    "test_compare_e2e.py": "the time budget's parts add up to the wall time",
    "test_deepspeed.py": "/dev/shm's DeepSpeed buffers before and after",
    "test_deepspeed_zero.py": "/dev/shm's DeepSpeed buffers before and after",
    "test_entry_overlap.py": "overlap and waiting times within 1 s",
    "test_faults.py": "a serve within 7 s, 2 s request timeouts",
    "test_forecast.py": "--plan within 5 s",
    "test_forecast_e2e.py": "a measured TPOT inside the forecast from the same machine's peaks",
    "test_hf_stream.py": "a request sent within 45 ms",
    "test_html_report.py": "Chromium's page ready within 20 s",
    "test_memory_guard.py": "a skipped sweep within 60 s",
    "test_multinode.py": "a kill timed into a batch; ports chosen before they are bound",
    "test_openai_server.py": "send slip, token gaps, start-up within seconds; a port chosen before it is bound",
    "test_overhead_bench.py": "the harness against a bare loop, pair by pair",
    "test_profile_trace.py": "traced against untraced TPOT",
    "test_resume.py": "kills at 0.5-3.5 s must land after a row",
    "test_roofline.py": "the CPU's peaks measured",
    "test_roofline_e2e.py": "decode bandwidth against the CPU's measured peak",
    "test_saturation.py": "which rates saturate an engine of known capacity",
    "test_server_grid.py": "TPOT p50 below 20 ms",
    "test_slurm_cluster.py": "fixed ports and the machine's munged",
    "test_stream_e2e.py": "rates that must not saturate; orphaned /dev/shm segments removed",
    "test_stream_release.py": "a spin's loop turns in 0.15 s",
    "test_vllm_stream.py": "send slip below 5 ms, token gaps",
    "test_wait_notices.py": "a port chosen before it is bound",
}


def pytest_collection_modifyitems(items):
    """A GPU or Slurm test always starts engines: it is in the engine tier without saying so twice. A file in ALONE
    is marked `alone`."""
    for item in items:
        if item.get_closest_marker("gpu") or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.engine)
        if item.path.name in ALONE:
            item.add_marker(pytest.mark.alone)


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

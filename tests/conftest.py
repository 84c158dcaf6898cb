"""Shared by every test: the repository root, `run_benchmark` (a sweep as a user runs it), and the tiers.

The suite has two tiers. `make test-fast` runs the tests that start no engine, server or sweep process (`-m "not
engine"`, under 2 minutes here); `make test` runs everything. A test that starts one carries `@pytest.mark.engine`
(or its module's `pytestmark`); one that forgets fails on the process it tries to start, in either tier, so the
fast tier stays fast as tests are added.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# What in a command line makes it an engine, a server or a sweep: the CLI, a worker, ranks, the overhead and
# agreement benchmarks, a server, a venv being built.
ENGINE_COMMANDS = ("benchmark.py", "harness.run.worker", "harness.run.preload", "harness.run.node_agent", "torchrun",
                   "benchmarks/", "vllm", "serve", "setup-venv.sh", "slurmctld", "slurmd", "sbatch")


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


# The engine tier runs two files at a time, each on a core of its own (`--pin-cores`, below). These files need the
# whole machine and run after it, one test at a time, with nothing beside them. Every other file passed beside an
# engine test on the other core, the timing tests included (send slip, saturation, kills timed into a batch), within
# the margins they have alone.
ALONE = {
    "test_crosscheck.py": "DeepSpeed tensor parallelism over 2 ranks needs 2 cores",
    "test_deepspeed.py": "DeepSpeed over 2 ranks needs 2 cores; /dev/shm's DeepSpeed buffers before and after",
    "test_deepspeed_zero.py": "ZeRO over 2 ranks needs 2 cores; /dev/shm's DeepSpeed buffers before and after",
    "test_memory_guard.py": "the host's free memory, which a test beside it moves",
    "test_slurm_cluster.py": "fixed ports and the machine's munged",
    "test_transformers_serve.py": "transformers serve's main loop spins in system calls: on one core its sweep took "
                                  "57 s, 36 s of it system time, against 41 s on two",
}

# The engine tier's heaviest files (seconds alone, make test-times), started first so that the two cores end
# together rather than one of them running a long file alone at the end (xdist hands out files in this order).
HEAVY_FIRST = ("test_production_load_e2e.py", "test_stream_e2e.py", "test_quantization.py", "test_multinode.py",
               "test_server_grid.py", "test_speculative_e2e.py", "test_resume.py", "test_vllm.py",
               "test_engine_grid.py", "test_accuracy_e2e.py", "test_openai_server.py", "test_roofline_e2e.py",
               "test_batch_search_e2e.py", "test_faults.py", "test_prompts_e2e.py")


def pytest_collection_modifyitems(config, items):
    """A GPU or Slurm test always starts engines: it is in the engine tier without saying so twice. A file in ALONE
    is marked `alone`. Under `--pin-cores`, the HEAVY_FIRST files come first, each file's tests in their order."""
    for item in items:
        if item.get_closest_marker("gpu") or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.engine)
        if item.path.name in ALONE:
            item.add_marker(pytest.mark.alone)
    if config.getoption("--pin-cores", default=False):
        rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


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


def pytest_addoption(parser):
    parser.addoption("--pin-cores", action="store_true",
                     help="under pytest-xdist, each worker keeps to its own share of the CPUs (make test's engine tier)")


def pytest_configure(config):
    """`--pin-cores`: xdist worker K of N keeps to the K-th of N equal shares of the CPUs this run may use, and every
    process it starts inherits that mask. The engines honour it (torch's and vLLM's thread counts and bindings follow
    the affinity mask), so two engine tests side by side each have a core of their own instead of both binding threads
    to every core, which slowed each tenfold. A sweep here is one busy core at a time: one on a core of its own takes
    the wall time it takes alone (a vLLM sweep 31.3 s pinned, 32.5 s not)."""
    worker = getattr(config, "workerinput", None)  # an xdist worker's own (its environment is its children's too)
    if not config.getoption("--pin-cores", default=False) or worker is None:
        return
    assert "torch" not in sys.modules, "pin before torch starts its thread pool, or it keeps a thread per core"
    cpus = sorted(os.sched_getaffinity(0))
    index, count = int(worker["workerid"].removeprefix("gw")), int(worker["workercount"])
    share = cpus[index * len(cpus) // count:(index + 1) * len(cpus) // count] or [cpus[index % len(cpus)]]
    os.sched_setaffinity(0, share)

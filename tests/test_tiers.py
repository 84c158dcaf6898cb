"""The suite's tiers (tests/conftest.py): a test that starts an engine, a server or a sweep process without the
`engine` mark is refused the process, so `make test-fast` (`-m "not engine"`) cannot silently grow slow."""

import os

import pytest

from tests.conftest import REPO, starts_engine

pytest_plugins = ["pytester"]

INNER = """
import subprocess

import os

import pytest


def test_unmarked_sweep():
    subprocess.run(["true", "benchmark.py", "yamls/cpu-tiny.yaml"], check=True)


@pytest.mark.engine
def test_marked_sweep():
    subprocess.run(["true", "benchmark.py", "yamls/cpu-tiny.yaml"], check=True)


def test_unmarked_tool():
    subprocess.run(["true", "--version"], check=True)


@pytest.fixture(scope="module")
def server():
    subprocess.run(["true", "vllm", "serve"], check=True)


def test_a_module_fixture_starts_it_for_an_unmarked_test(server):
    pass
"""


def with_the_suites_conftest(pytester) -> None:
    """A scratch suite run by this repository's conftest, its markers declared."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    engine: starts an engine\n    gpu: gpu\n    slurm: slurm\n"
                     "    alone: alone\n")


@pytest.mark.parametrize("argv, expected", [
    (["python", "benchmark.py", "y.yaml"], True), (["python", "-m", "harness.run.worker", "job"], True),
    (["torchrun", "--nproc-per-node", "2"], True), (["bash", "scripts/setup-venv.sh", "v"], True),
    ("python benchmarks/overhead/hf_batch.py", True), (["git", "status"], False), (["lint-imports"], False),
])
def test_what_counts_as_an_engine_process(argv, expected):
    assert starts_engine(argv) is expected


def test_an_unmarked_test_is_refused_its_engine_process(pytester):
    with_the_suites_conftest(pytester)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_unmarked_sweep starts*mark it @pytest.mark.engine*"])
    result.stdout.fnmatch_lines(["*ERROR*test_a_module_fixture_starts_it_for_an_unmarked_test*"])


PINNED = """
import os


def test_where_it_runs():
    share = sorted(os.sched_getaffinity(0))
    with open(os.path.join(os.environ["PINNED_OUT"], os.environ["PYTEST_XDIST_WORKER"]), "w") as f:
        f.write(repr(share))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two workers on cores of their own need two cores")
def test_pinned_workers_each_keep_to_their_own_share_of_the_cores(pytester, monkeypatch):
    """make test's engine tier (`-n 2 --pin-cores`): each xdist worker, and so each engine it starts, on its own half of
    the CPUs, the two halves together every CPU the run had."""
    with_the_suites_conftest(pytester)
    pytester.makepyfile(test_one=PINNED, test_two=PINNED)
    monkeypatch.setenv("PINNED_OUT", str(pytester.path))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "--pin-cores")
    result.assert_outcomes(passed=2)
    shares = [eval((pytester.path / worker).read_text()) for worker in ("gw0", "gw1")]
    cpus = sorted(os.sched_getaffinity(0))
    assert shares == [cpus[:len(cpus) // 2], cpus[len(cpus) // 2:]]


def test_the_heavy_files_come_first_under_pin_cores_each_in_its_own_order(pytester):
    from tests.conftest import HEAVY_FIRST

    assert sorted(name for name in HEAVY_FIRST if not (REPO / "tests" / name).exists()) == []
    with_the_suites_conftest(pytester)
    body = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    pytester.makepyfile(**{"test_aaa": body, HEAVY_FIRST[1].removesuffix(".py"): body,
                           HEAVY_FIRST[0].removesuffix(".py"): body})
    # In a process of its own: this one may have imported the real files of those names.
    ids = [line.split(" ")[0] for line in pytester.runpytest_subprocess("--collect-only", "-q", "--pin-cores",
                                                                         "-p", "no:cacheprovider").outlines
           if "::" in line]
    assert ids == [f"{name}::test_{t}" for name in (*HEAVY_FIRST[:2], "test_aaa.py") for t in "ab"]

"""The suite's tiers (tests/conftest.py): a test that starts an engine, a server or a sweep process without the
`engine` mark is refused the process, so `make test-fast` (`-m "not engine"`) cannot silently grow slow."""

import pytest

from tests.conftest import REPO, starts_engine

pytest_plugins = ["pytester"]

INNER = """
import subprocess

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


@pytest.mark.parametrize("argv, expected", [
    (["python", "benchmark.py", "y.yaml"], True), (["python", "-m", "harness.run.worker", "job"], True),
    (["torchrun", "--nproc-per-node", "2"], True), (["bash", "scripts/setup-venv.sh", "v"], True),
    ("python benchmarks/overhead/hf_batch.py", True), (["git", "status"], False), (["lint-imports"], False),
])
def test_what_counts_as_an_engine_process(argv, expected):
    assert starts_engine(argv) is expected


def test_an_unmarked_test_is_refused_its_engine_process(pytester):
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    engine: starts an engine\n    gpu: gpu\n    slurm: slurm\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_unmarked_sweep starts*mark it @pytest.mark.engine*"])
    result.stdout.fnmatch_lines(["*ERROR*test_a_module_fixture_starts_it_for_an_unmarked_test*"])

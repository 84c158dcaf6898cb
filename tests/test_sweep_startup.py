"""benchmarks/sweep_startup.py's arguments: a bad one is one line naming the flag and what is allowed, exit 2."""

import sys
from pathlib import Path

import pytest

from tests.contract import refused_argument

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import sweep_startup  # noqa: E402


@pytest.mark.parametrize("argv, says", [
    (["--runs", "0"], "--runs: must be a finite int of at least 1, got '0'"),
    (["--runs", "1.5"], "--runs: must be a finite int of at least 1, got '1.5'"),
    (["--runs", "nan"], "--runs: must be a finite int of at least 1, got 'nan'"),
    (["--tree", "/nonexistent"], "--tree: /nonexistent has no benchmark.py (a checkout of this repository)"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, says, capsys):
    assert says in refused_argument(sweep_startup.parse_args, argv, capsys)


def test_the_trees_default_to_none_given():
    assert sweep_startup.parse_args([]).tree == [] and sweep_startup.parse_args(["--tree", "."]).tree == [Path(".")]

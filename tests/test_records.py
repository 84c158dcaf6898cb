"""A point's data flows one way (docs/architecture.md, "A point's data"): the runner builds its record once, the
annotators answer with records of their own, and the sink composes the row. Held two ways: the records are frozen
(an assignment raises), and no code in the repository assigns to, or mutates in place, a field of a point's record
(an AST check, which also catches what would only fail at run time on a path no test takes)."""

import ast
import dataclasses
from pathlib import Path

import pytest

from harness.measure.annotations import Annotations
from harness.measure.records import BatchSample, PointResult, RunContext
from harness.plan.points import SweepPoint

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("app", "backends", "benchmarks", "harness", "plots", "workloads", "mosaic", "slurm", "scripts", "tests")
RECORD_FIELDS = {f.name for cls in (PointResult, BatchSample) for f in dataclasses.fields(cls)}
# Calls that change a list, dict or set in place.
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "add", "discard", "sort"}


def record_edits(source: str):
    """Each `x.<record field> = ...` (also `+=`, `x.field[k] = ...`, `del x.field[k]`) and `x.<record field>.append(...)`
    and the like, where x is not the object's own `self`, with its line; and `setattr` or `object.__setattr__` of a
    record field's name."""
    found = []

    def foreign_field(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in RECORD_FIELDS
                and not (isinstance(node.value, ast.Name) and node.value.id == "self"))

    for node in ast.walk(ast.parse(source)):
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if foreign_field(target):
                found.append((node.lineno, ast.unparse(target)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATORS and foreign_field(node.func.value):
                found.append((node.lineno, ast.unparse(node.func)))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("setattr", "object.__setattr__") \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in RECORD_FIELDS:
            found.append((node.lineno, ast.unparse(node.func)))
    return found


def test_no_code_edits_a_point_record_after_it_is_built():
    edits = [f"{path.relative_to(ROOT)}:{line}: {text}"
             for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))
             if path != Path(__file__)  # whose last test assigns on purpose, to see it refused
             for line, text in record_edits(path.read_text())]
    assert edits == []


@pytest.mark.parametrize("line", [
    "result.search = 'probe'", "result.perplexity += 1", "probe.engine_stats['batching'] = 'static'",
    "result.samples.append(sample)", "result.engine_stats.update(stats)", "object.__setattr__(r, 'status', 'ok')",
    "del result.phase_s['timed_s']",
])
def test_the_check_finds_each_kind_of_edit(line):
    found = record_edits(f"def f(result, probe, sample, stats, r):\n    {line}\n")
    assert [at for at, _ in found] == [2], found


def test_its_own_state_and_other_names_are_not_edits():
    assert record_edits("class A:\n    def f(self, x):\n        self.status = x\n        x.label = 1\n") == []


def test_records_refuse_assignment():
    result = PointResult(RunContext("b", "hf", "m", "fp32", "cpu", 1, 1), SweepPoint(16, 4, 1), "ok")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "error"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Annotations().tokens.tokens_identical_share = 1.0

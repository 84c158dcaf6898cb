"""The plots import the results files' column names (harness/measure/columns/names.py) rather than spell them: no
string literal in plots/ outside a docstring equals a declared column name, so a renamed or dropped column breaks
the plots at import (and under mypy), not silently on a chart."""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from harness.measure.columns.page import FILES

REPO = Path(__file__).resolve().parent.parent
PLOTS = REPO / "plots"
DECLARED: Set[str] = set().union(*FILES.values())

# Literals that equal a column name but mean something else there, by (file, enclosing function, value). Keep it
# short: a column read belongs in names.py's namespaces, however the word is spelled.
NOT_COLUMNS: Dict[Tuple[str, str, str], str] = {
    # manifest.json's sections (harness/measure/manifest.py writes them), read to fill the columns of that name
    ("plots/load.py", "manifest_hardware_label", "hardware"): "manifest.json's hardware section",
    ("plots/load.py", "manifest_model_name", "model"): "manifest.json's model section",
    # a word of the report's prose ("goodput is 1.3x as much with ..."), not a lookup
    ("plots/stream/report.py", "_compare", "goodput"): "the figure's name in a sentence",
    # the manifest's config, read for the sweep's own targets (plots/best/targets.py): its keys, not columns
    ("plots/best/targets.py", "from_slo", "ttft_ms"): "stream.slo's key in manifest.json's config",
    ("plots/best/targets.py", "from_slo", "tpot_ms"): "stream.slo's key in manifest.json's config",
    ("plots/best/targets.py", "of_manifests", "scenario"): "the config's scenario key in manifest.json",
}


def _docstrings(tree: ast.AST) -> Set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _constants(node: ast.AST, function: str) -> Iterator[Tuple[ast.Constant, str]]:
    """Every constant under `node`, with the name of the innermost function around it ("" at module level)."""
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        if isinstance(child, ast.Constant):
            yield child, function
        yield from _constants(child, inner)


def spelled_columns(root: Path, names: Set[str], allowed: Optional[Dict[Tuple[str, str, str], str]] = None
                    ) -> List[str]:
    """`file:line: 'name'` for each string literal under `root` that is a column name, docstrings and `allowed` aside;
    also each `allowed` entry no literal uses any more, so the list cannot outlive its reasons."""
    found, used = [], set()
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        tree = ast.parse(path.read_text())
        docstrings = _docstrings(tree)
        for node, function in _constants(tree, ""):
            if not isinstance(node.value, str) or node.value not in names or id(node) in docstrings:
                continue
            if (name, function, node.value) in (allowed or {}):
                used.add((name, function, node.value))
            else:
                found.append(f"{name}:{node.lineno}: {node.value!r}")
    return found + [f"stale allowance: {key}" for key in (allowed or {}) if key not in used]


def test_no_column_name_is_spelled_in_plots():
    found = spelled_columns(PLOTS, DECLARED, NOT_COLUMNS)
    assert found == [], "import the name from harness.measure.columns.names instead:\n" + "\n".join(found)


def test_a_spelled_column_is_found(tmp_path):
    package = tmp_path / "plots"
    package.mkdir()
    (package / "chart.py").write_text('"""ttft_ms_p50 in a docstring is prose."""\n\n\n'
                                      'def draw(rows):\n    return rows["ttft_ms_p50"], rows[f"{rows[\'status\']}"]\n')
    assert spelled_columns(package, DECLARED) == ["plots/chart.py:5: 'ttft_ms_p50'", "plots/chart.py:5: 'status'"]
    allowed = {("plots/chart.py", "draw", "status"): "a test", ("plots/chart.py", "gone", "model"): "a test"}
    assert spelled_columns(package, DECLARED, allowed) == [
        "plots/chart.py:5: 'ttft_ms_p50'", "stale allowance: ('plots/chart.py', 'gone', 'model')"]

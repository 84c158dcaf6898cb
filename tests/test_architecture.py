"""The layout docs/architecture.md describes, held: import-linter's contracts catch an import that goes up a layer or
closes a loop (inside a function too), and no package, file or function outgrows what a reader can see at once."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "backends", "workloads", "plots", "mosaic", "slurm", "harness")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
MAX_MODULES_PER_PACKAGE = 15
MAX_FILE_LINES = 350
MAX_FUNCTION_LINES = 60
# A file past MAX_FILE_LINES says here why it has no seam worth cutting.
LONG_FILES = {}


def lint_imports(root: Path) -> Tuple[int, str]:
    """Exit code and what it said, as one line of words (its colours and line breaks taken out)."""
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120)
    return proc.returncode, " ".join(re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr).split())


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def add_import(path: Path, line: str, inside_function: bool = False) -> None:
    text = path.read_text()
    if inside_function:
        line = f"\n\ndef _reaches_up():\n    {line}\n"
        path.write_text(text + line)
    else:
        path.write_text(line + "  # noqa\n" + text)


def test_the_contracts_hold_on_this_tree():
    code, said = lint_imports(REPO)
    assert code == 0, said
    assert "3 kept, 0 broken" in said


@pytest.mark.parametrize("module, line, broken", [
    # config is below model: a config section that reads a model spec goes up a layer
    ("harness/config/sections.py", "from harness.model.spec import ModelSpec", "harness.config is not allowed to import "
     "harness.model"),
    # the library never knows the app, nor a plug-in
    ("harness/measure/records.py", "import app.session", "harness is not allowed to import app"),
    ("harness/plan/sweep.py", "from backends.registry import BACKENDS", "harness is not allowed to import backends"),
    # plug-ins sit beside each other
    ("plots/data.py", "import backends.generate.hf", "plots is not allowed to import backends"),
])
def test_an_import_up_a_layer_fails(tree, module, line, broken):
    add_import(tree / module, line)
    code, said = lint_imports(tree)
    assert code == 1 and broken in said, said


def test_an_import_inside_a_function_counts(tree):
    add_import(tree / "harness/model/memory.py", "from harness.plan.sweep import plan_sweep", inside_function=True)
    code, said = lint_imports(tree)
    assert code == 1 and "harness.model is not allowed to import harness.plan" in said, said


def test_a_loop_within_a_layer_fails(tree):
    # session imports console; console reaching back for session closes a loop, even lazily
    add_import(tree / "app/console.py", "from app.session import run_sweep", inside_function=True)
    code, said = lint_imports(tree)
    assert code == 1 and "No cycles are allowed in app" in said, said


def python_files(package: str):
    return sorted((REPO / package).rglob("*.py"))


def test_no_package_holds_more_than_a_reader_can_scan():
    folders = {path.parent for package in PACKAGES for path in python_files(package)}
    crowded = {str(f.relative_to(REPO)): n for f in folders
               if (n := len([p for p in f.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES_PER_PACKAGE}
    assert not crowded, f"split these by axis (docs/architecture.md): {crowded}"


def test_no_file_or_function_outgrows_a_screen():
    long_files, long_functions = {}, {}
    for package in (*PACKAGES, "benchmarks", "scripts"):
        for path in python_files(package):
            name, text = str(path.relative_to(REPO)), path.read_text()
            lines = text.count("\n")
            if lines > MAX_FILE_LINES and name not in LONG_FILES:
                long_files[name] = lines
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        long_functions[f"{name}:{node.lineno} {node.name}"] = length
    assert not long_files, f"over {MAX_FILE_LINES} lines: {long_files}"
    assert not long_functions, f"over {MAX_FUNCTION_LINES} lines: {long_functions}"


def test_package_inits_only_hand_names_on():
    """An __init__.py holds a docstring and imports: logic lives in a module a reader can find by its name."""
    for package in PACKAGES:
        for init in (REPO / package).rglob("__init__.py"):
            body = ast.parse(init.read_text()).body
            logic = [node for node in body if not isinstance(node, (ast.Import, ast.ImportFrom))
                     and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
                     and not (isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"])]
            assert not logic, f"{init.relative_to(REPO)} holds logic at line {logic[0].lineno}"

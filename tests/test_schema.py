"""`python benchmark.py --schema [SECTION]` prints the typed config as it is checked, and the backend-option table of
docs/guides/engines.md is held to it: an option added to a backend without a row there (or a row left for a removed
one) fails."""

import re
from pathlib import Path

import pytest

from app.cli import main
from backends.base import BackendOptions
from backends.registry import BACKENDS
from harness.config import schema
from workloads.registry import WORKLOADS

ENGINES_PAGE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "engines.md"
COMMON = [k.name for k in schema.keys(BackendOptions)]  # every entry's: the page says so above the table


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def documented_backend_options() -> dict:
    """Backend name -> the option names its rows of the engines page's table list (`a`, `b` in one row counts
    both)."""
    table, current = {}, None
    lines = ENGINES_PAGE.read_text().splitlines()
    start = lines.index("| backend | option | default | meaning |")
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0]:
            current = re.match(r"`(\w+)`", cells[0]).group(1)
        table.setdefault(current, set()).update(re.findall(r"`(\w+)`", cells[1]))
    return table


def test_the_engines_page_lists_exactly_each_backends_options():
    sections = schema.sections(BACKENDS, WORKLOADS)
    documented = documented_backend_options()
    assert set(documented) == set(BACKENDS.names())
    for name in BACKENDS.names():
        cls, _ = sections[f"backends.{name}"]
        options = {k.name for k in schema.keys(cls)} - set(COMMON)
        assert documented[name] == options, f"docs/guides/engines.md rows for {name}: add {options - documented[name]}, " \
                                            f"remove {documented[name] - options}"


def test_every_key_has_a_type_a_default_and_help():
    for name, (cls, what) in schema.sections(BACKENDS, WORKLOADS).items():
        assert what, name
        for key in schema.keys(cls):
            assert key.help and key.type and key.default, f"{name}.{key.name}"


def test_a_section_prints_its_keys(capsys):
    code, out, _ = run(capsys, "--schema", "backends.vllm")
    assert code == 0 and out.startswith("[backends.vllm]")
    assert re.search(r"^  kv_cache_memory_bytes +int \| null \(bytes >= 1\) +null +KV cache size", out, re.M)
    assert re.search(r"^  enforce_eager +bool +false ", out, re.M)
    assert "[backends.hf]" not in out


def test_everything_by_default_with_required_keys_and_nested_sections(capsys):
    code, out, _ = run(capsys, "--schema")
    assert code == 0
    headers = re.findall(r"^\[([\w.]+)\]", out, re.M)
    assert headers[0] == "sweep" and {"stream.slo", "speculative.draft", "workload.prompts"} <= set(headers)
    assert {f"backends.{n}" for n in BACKENDS.names()} <= set(headers)
    assert re.search(r"^  benchmark_name +str +required ", out, re.M)
    assert re.search(r"^  dtype +str +\"bf16\" ", out, re.M)
    # a prefix gives every section under it
    code, out, _ = run(capsys, "--schema", "backends")
    assert re.findall(r"^\[([\w.]+)\]", out, re.M) == [f"backends.{n}" for n in BACKENDS.names()]


@pytest.mark.parametrize("argv,message", [
    (["--schema", "spec"], "error: --schema: no section 'spec'"),
    (["yamls/cpu-tiny.yaml", "--schema"], "error: --schema: takes an optional SECTION only, no CONFIG"),
])
def test_bad_schema_requests_are_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1 and not out

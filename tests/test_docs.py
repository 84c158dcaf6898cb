"""The docs say what the code does: generated reference pages are current, the README stays a front page, and the
facts a page states by hand (Python range, demo series, backend options) are held to the code they describe."""

import re
import tomllib
from pathlib import Path

import pytest

from app.reference import DOCS, PAGES, ROOT
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from harness.model.spec import preset_names
from workloads.registry import WORKLOADS

README = ROOT / "README.md"
README_MAX_WORDS = 2000
README_SECTIONS = ("## Two commands", "## The CPU demo", "## Your model on your GPU", "## Reading the results",
                   "## Documentation")


@pytest.mark.parametrize("page", list(PAGES))
def test_generated_reference_pages_are_current(page):
    on_disk = (DOCS / page).read_text() if (DOCS / page).exists() else ""
    assert on_disk == PAGES[page](), f"docs/{page} is out of date: run python scripts/gen_docs.py"


def test_every_generated_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [page for page in PAGES if f": {page}" not in nav] == []


def test_the_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.split()) <= README_MAX_WORDS
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert [s for s in README_SECTIONS if s not in headings] == []


def test_readme_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    assert links, "the README links into the docs"
    assert [link for link in links if "://" not in link and not (ROOT / link).exists()] == []


def python_range(text: str):
    """(3, 11), (3, 14) from a sentence such as 'Python 3.11 to 3.14'."""
    found = re.findall(r"Python (3)\.(\d+) to (3)\.(\d+)", text)
    return {((int(a), int(b)), (int(c), int(d))) for a, b, c, d in found}


def test_the_python_range_is_one_range_everywhere():
    setup = (ROOT / "scripts" / "setup-venv.sh").read_text()
    m = re.search(r"\((\d+), (\d+)\) <= sys.version_info\[:2\] <= \((\d+), (\d+)\)", setup)
    checked = ((int(m[1]), int(m[2])), (int(m[3]), int(m[4])))
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={checked[0][0]}.{checked[0][1]},<{checked[1][0]}.{checked[1][1] + 1}"
    for page in (README, DOCS / "getting-started" / "install.md"):
        assert python_range(page.read_text()) == {checked}, page


def test_the_demo_report_shows_the_demo_yamls_entries():
    """docs/demo/ is `make docs-demo`'s copy of a cpu-tiny sweep's charts: its summary has a series per entry of
    yamls/cpu-tiny.yaml, and none other."""
    config = load_config(ROOT / "yamls" / "cpu-tiny.yaml", [], BACKENDS, WORKLOADS)
    report = (DOCS / "demo" / "report.md").read_text()
    summary = report.split("## Summary", 1)[1].split("\n## ", 1)[0]
    series = {row.split("|")[1].strip().split(" · ")[0] for row in summary.splitlines()
              if row.startswith("| ") and not row.startswith("| series")}
    assert series == {entry.entry_label for entry in config.backends}


DEMO_CONSOLE = DOCS / "demo" / "console.txt"
DEMO_FOLDER = "results/cpu-tiny-<YYYYmmdd-HHMMSS>"  # as `make demo` names it; docs-demo's run wrote results/docs-demo


def quoted_console(page: Path, after: str) -> list:
    """The lines of the first ```text block after `after` on `page`, without its `...` abridgements."""
    block = page.read_text().split(after, 1)[1].split("```text\n", 1)[1].split("\n```", 1)[0]
    return [line.strip().replace(DEMO_FOLDER, "results/docs-demo") for line in block.splitlines()
            if line.strip() != "..."]


@pytest.mark.parametrize("page, after", [(README, "## The CPU demo"),
                                         (DOCS / "getting-started" / "first-sweep.md", "## What it prints")])
def test_the_demo_console_quoted_is_the_demo_reports_run(page, after):
    """Every console line the README and "Your first sweep" quote is a line of docs/demo/console.txt: `make
    docs-demo` writes it with the report the pages link, so the quoted figures and that report are one run's."""
    printed = {line.strip() for line in DEMO_CONSOLE.read_text().splitlines()}
    quoted = quoted_console(page, after)
    assert len(quoted) >= 5 and [line for line in quoted if line not in printed] == []


def section(page: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of the same level."""
    level = heading.split(" ", 1)[0]
    return page.read_text().split(f"\n{heading}\n", 1)[1].split(f"\n{level} ", 1)[0]


def test_the_sweeps_guide_lists_every_preset():
    listed = section(DOCS / "guides" / "sweeps.md", "## Presets")
    names = {name for line in listed.splitlines() if line.startswith("- ")
             for name in re.findall(r"`([^`]+)`", line)}
    assert names == set(preset_names())


def test_the_sweeps_guide_lists_every_yaml():
    listed = section(DOCS / "guides" / "sweeps.md", "## The example YAMLs")
    names = {name for line in listed.splitlines() if line.startswith("| `")
             for name in re.findall(r"`([^`]+\.yaml)`", line.split("|")[1])}
    assert names == {path.name for path in (ROOT / "yamls").glob("*.yaml")}

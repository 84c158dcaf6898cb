"""The column reference (harness/measure/columns/) is held to the writers: every column each file is written with
has a declaration and no declaration is stale; units agree with what names say; every link into the measurement
contract lands on a heading; and docs/reference/columns.md is the page the declarations generate."""

import re
import unicodedata
from pathlib import Path

import pytest

from harness.measure import columns, writers

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "measurement.md"
PAGE = ROOT / "docs" / "reference" / "columns.md"

# A statistic or an interval end after the unit: latency_ms_p99, itl_ms_max, throughput_tokens_per_s_ci95_low.
STAT_SUFFIX = re.compile(r"_(mean|p50|p90|p99|std|max|ci95_low|ci95_high)$")
# What a name's ending says its unit is; first match wins, so longer endings come before the ones they end with.
UNIT_BY_ENDING = (
    ("_cv", columns.RATIO), ("_ratio", columns.RATIO),
    ("_tokens_per_s", columns.TOKENS_PER_S), ("_j_per_output_token", columns.JOULES_PER_TOKEN),
    ("_ms", columns.MS), ("_s", columns.S),
    ("_bytes_per_step", columns.BYTES), ("_bytes", columns.BYTES),
    ("_gbps", columns.GBPS), ("_tflops", columns.TFLOPS),
    ("_flops_per_step", columns.FLOP), ("_flops", columns.FLOP),
    ("_w", columns.WATTS), ("_j", columns.JOULES),
    ("_per_million_output_tokens", columns.PRICE_PER_M_TOKENS),
    ("_tokens", columns.TOKENS), ("_length", columns.TOKENS),
    ("request_rate", columns.REQUESTS_PER_S),
    ("_share", columns.SHARE), ("_hit_rate", columns.SHARE), ("acceptance_rate", columns.SHARE),
    ("_usage", columns.SHARE), ("_agreement", columns.SHARE), ("_attainment", columns.SHARE),
)
# Units a name must then say: a time, size, rate of work or power nobody should have to guess.
NAMED_UNITS = {columns.MS, columns.S, columns.BYTES, columns.GBPS, columns.TFLOPS, columns.TOKENS_PER_S,
               columns.WATTS, columns.JOULES, columns.JOULES_PER_TOKEN}
CONTRACT_LINK = re.compile(r"\]\(\.\./measurement\.md#([^)\s]+)\)")


def unit_of_name(name: str):
    """The unit `name`'s ending implies, or None where it implies none."""
    if name.startswith("num_"):
        return columns.COUNT
    stem = STAT_SUFFIX.sub("", name)
    return next((unit for ending, unit in UNIT_BY_ENDING if stem.endswith(ending)), None)


def slugify(heading: str) -> str:
    """MkDocs' heading anchors (Python-Markdown's toc slugify): code marks and punctuation dropped, lowercase,
    runs of spaces and hyphens to one hyphen."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def contract_anchors() -> set:
    anchors, fenced = set(), False
    for line in CONTRACT.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            anchors.add(slugify(line.lstrip("#").strip()))
    return anchors


def every_declaration():
    return [(file, c) for file, declared in columns.FILES.items() for c in declared.values()]


@pytest.mark.parametrize("file", list(columns.FILES))
def test_every_written_column_is_declared_and_no_declaration_is_stale(file):
    written = columns.written_columns()[file]
    declared = columns.FILES[file]
    assert len(written) == len(set(written)), f"{file}: a column is written twice"
    assert [n for n in written if n not in declared] == [], f"{file}: written without a declaration"
    assert [n for n in declared if n not in written] == [], f"{file}: declared but not written (stale)"


def test_the_declarations_cover_the_files_the_writers_write():
    assert set(columns.written_columns()) == set(columns.FILES)
    assert columns.written_columns()["server_metrics/*.csv"] == writers.SERVER_SERIES_COLUMNS


def test_units_agree_with_what_names_say():
    wrong = []
    for file, c in every_declaration():
        implied = unit_of_name(c.name)
        if implied is not None and c.unit != implied:
            wrong.append(f"{file} {c.name}: unit {c.unit!r}, its name says {implied!r}")
        if c.unit in NAMED_UNITS and implied != c.unit:
            wrong.append(f"{file} {c.name}: unit {c.unit!r} but its name does not say so")
    assert wrong == []


def test_every_column_has_a_meaning_and_a_where():
    assert [f"{file} {c.name}" for file, c in every_declaration() if not c.meaning.strip() or not c.where.strip()] == []


def test_contract_links_land_on_headings():
    anchors = contract_anchors()
    assert "per-point-resultscsv" in anchors  # the slug rule itself, on a heading with code and punctuation
    broken = [f"{file} {c.name}: #{a}" for file, c in every_declaration()
              for a in CONTRACT_LINK.findall(c.meaning) if a not in anchors]
    assert broken == []


def test_the_page_lists_columns_in_the_writers_order():
    page = columns.reference_markdown()
    for file, written in columns.written_columns().items():
        section = page.split(f"## {file}\n", 1)[1].split("\n## ", 1)[0]
        assert re.findall(r"^\| `([^`]+)` \|", section, flags=re.M) == written


def test_an_undeclared_column_stops_the_page_naming_it(monkeypatch):
    monkeypatch.setattr(writers, "SAMPLE_COLUMNS", [*writers.SAMPLE_COLUMNS, "brand_new_ms"])
    with pytest.raises(KeyError, match="brand_new_ms"):
        columns.reference_markdown()


def test_reference_page_is_current():
    current = PAGE.read_text() if PAGE.exists() else ""
    assert current == columns.reference_markdown(), \
        "docs/reference/columns.md is out of date: run python scripts/gen_docs.py"

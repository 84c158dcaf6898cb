"""The column reference (harness/measure/columns/) is held to the writers: every column each file is written with
has a declaration and no declaration is stale; units agree with what names say; every link into the measurement
contract lands on a heading; and docs/reference/columns.md is the page the declarations generate."""

import re
import unicodedata
from pathlib import Path

import pytest

from harness.measure import columns, writers
from harness.measure.annotations import Annotations
from harness.measure.columns import names
from harness.measure.columns.base import FLAG_WORDS
from harness.measure.columns.results import ENGINE_STAT_COLUMNS, RESULTS
from harness.measure.explain import RooflineFigures
from harness.measure.records import SLO, BatchSample, PointResult, RunContext
from harness.measure.sink import result_row
from harness.measure.writers import ResultsDir
from harness.model.roofline import ROOFLINE_COLUMNS
from harness.plan.points import SweepPoint
from harness.scenarios.batch import SpecCounts
from harness.scenarios.stream import SERVER_SERIES, RequestTiming, ServerSeries, StreamTiming

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "measurement.md"
PAGE = ROOT / "docs" / "reference" / "columns.md"

# A statistic or an interval end after the unit: latency_ms_p99, itl_ms_max, throughput_tokens_per_s_ci95_low.
STAT_SUFFIX = re.compile(r"_(mean|p50|p90|p99|std|max|ci95_low|ci95_high)$")
# What a name's ending says its unit is; first match wins, so longer endings come before the ones they end with.
UNIT_BY_ENDING = (
    ("_cv", columns.RATIO), ("_ratio", columns.RATIO),
    ("_tokens_per_s", columns.TOKENS_PER_S), ("_tokens_per_s_per_gpu", columns.TOKENS_PER_S),
    ("_tokens_per_s_per_user", columns.TOKENS_PER_S), ("_j_per_output_token", columns.JOULES_PER_TOKEN),
    ("_kwh_per_million_output_tokens", columns.KWH_PER_M_TOKENS),
    ("inputs_per_s", columns.INPUTS_PER_S), ("_ms", columns.MS), ("_s", columns.S),
    ("_bytes_per_step", columns.BYTES), ("_bytes", columns.BYTES),
    ("_gbps", columns.GBPS), ("_tflops", columns.TFLOPS),
    ("_flops_per_step", columns.FLOP), ("_flops", columns.FLOP),
    ("_w", columns.WATTS), ("_j", columns.JOULES),
    ("_per_million_output_tokens", columns.PRICE_PER_M_TOKENS),
    ("_tokens", columns.TOKENS), ("_length", columns.TOKENS),
    ("request_rate", columns.REQUESTS_PER_S),
    ("_share", columns.SHARE), ("_hit_rate", columns.SHARE), ("acceptance_rate", columns.SHARE),
    ("_usage", columns.SHARE), ("_agreement", columns.SHARE), ("_attainment", columns.SHARE),
    ("_mhz", columns.MHZ), ("_max_c", columns.CELSIUS),
)
# Units a name must then say: a time, size, rate of work or power nobody should have to guess.
NAMED_UNITS = {columns.MS, columns.S, columns.BYTES, columns.GBPS, columns.TFLOPS, columns.TOKENS_PER_S,
               columns.WATTS, columns.JOULES, columns.JOULES_PER_TOKEN, columns.KWH_PER_M_TOKENS,
               columns.MHZ, columns.CELSIUS, columns.INPUTS_PER_S}
CONTEXT = RunContext("columns-test", "hf", "tiny-llama", "fp32", "cpu", 1, 1)
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


def _engine_stat(column: str):
    """A value of an engine's own figure as the engine gives it: a bool for a flag column, else a number."""
    return True if RESULTS[column].unit in FLAG_WORDS else 1


def batch_result():
    """A batch point that fills every figure a batch can: per-sequence stamps, speculation counters, energy."""
    samples = tuple(BatchSample(i, 100.0 + i, 10.0, 3.0, (16, 16), (8, 8), (10.0, 11.0), (100.0, 101.0),
                                SpecCounts(4, 8, 5), 2.0, (4, 0)) for i in range(3))
    return PointResult(CONTEXT, SweepPoint(16, 8, 2), "ok", samples=samples, spec_method="ngram", spec_tokens=4,
                       engine_stats={**{c: _engine_stat(c) for c in ENGINE_STAT_COLUMNS}, "zero_optimization": {}},
                       converged=True, peak_memory_bytes=1, load_time_s=1.0)


def stream_result():
    """A stream point that fills every figure a stream can: a multi-turn request, cached tokens, server series."""
    requests = tuple(RequestTiming(i, 100.0 + i, 100.0 + i, 100.0 + i, 100.1 + i, 100.5 + i, 16, 8,
                                   token_gaps_s=(0.05,) * 7, queued_s=0.01, cached_tokens=4, conversation=0,
                                   turn=i + 1)
                     for i in range(3))
    server = ServerSeries((0.0, 1.0), {name: (0.0, 0.5 if name == "kv_cache_usage" else 2.0) for name in SERVER_SERIES})
    timing = StreamTiming(100.0, 103.0, requests, spec=SpecCounts(4, 8, 5), server=server)
    return PointResult(CONTEXT, SweepPoint(16, 8, None, "random", 2.0, 4), "ok", stream=timing,
                       slo=SLO(500.0, 50.0, 90.0))


@pytest.mark.parametrize("result", [batch_result(), stream_result()], ids=["batch", "stream"])
def test_every_cell_a_point_fills_is_a_declared_column(tmp_path, result):
    """The writers' headers are the declarations: a figure the code derives without a declaration is refused when
    written (csv.DictWriter raises), so writing a point that fills every figure shows none is missing."""
    notes = Annotations(roofline=RooflineFigures(dict.fromkeys(ROOFLINE_COLUMNS, 1.0)))
    row = result_row(result, None, notes)
    out = ResultsDir(tmp_path)
    out.open(resume=False)
    out.write_point(result, row)
    assert [r["backend"] for r in writers.read_rows(out.results_csv)] == ["hf"]
    assert "zero_optimization" not in row  # an engine's other figures go to the manifest only


def test_a_cell_without_a_declaration_is_refused(tmp_path):
    out = ResultsDir(tmp_path)
    out.open(resume=False)
    result = batch_result()
    with pytest.raises(ValueError, match="brand_new_ms"):
        out.write_point(result, {**result_row(result), "brand_new_ms": 1.0})


def test_the_writers_headers_are_the_declarations():
    assert writers.RESULT_COLUMNS == list(columns.FILES["results.csv"])
    assert writers.SAMPLE_COLUMNS == list(columns.FILES["samples.csv"])
    assert writers.REQUEST_COLUMNS == list(columns.FILES["requests.csv"])
    assert writers.ACCURACY_COLUMNS == list(columns.FILES["accuracy.csv"])
    assert writers.SERVER_SERIES_COLUMNS == ["t_s", *SERVER_SERIES]


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


def test_the_page_lists_columns_in_the_order_they_are_written():
    page = columns.reference_markdown()
    headers = {"results.csv": writers.RESULT_COLUMNS, "samples.csv": writers.SAMPLE_COLUMNS,
               "requests.csv": writers.REQUEST_COLUMNS, "server_metrics/*.csv": writers.SERVER_SERIES_COLUMNS}
    for file, header in headers.items():
        section = page.split(f"## {file}\n", 1)[1].split("\n## ", 1)[0]
        assert re.findall(r"^\| `([^`]+)` \|", section, flags=re.M) == header


def test_reference_page_is_current():
    current = PAGE.read_text() if PAGE.exists() else ""
    assert current == columns.reference_markdown(), \
        "docs/reference/columns.md is out of date: run python scripts/gen_docs.py"


# --- The names module the plots import (harness/measure/columns/names.py) ----------------------------------------

NAMESPACES = {"results.csv": names.R, "samples.csv": names.S, "requests.csv": names.Q,
              "server_metrics/*.csv": names.M, "accuracy.csv": names.A}


def names_mismatch(space: type, declared: list) -> list:
    """What keeps a namespace from holding exactly the declared columns, each as an attribute valued its own name:
    the lines to add (in the declarations' order), the attributes to remove, the values that differ from their name."""
    held = {a: getattr(space, a) for a in dir(space) if not a.startswith("_")}
    return ([f'add    {n} = "{n}"' for n in declared if n not in held]
            + [f"remove {a}" for a in sorted(held) if a not in declared]
            + [f"fix    {a} = {v!r}" for a, v in held.items() if a in declared and v != a])


def test_the_names_module_holds_every_files_columns_exactly():
    assert set(NAMESPACES) == set(columns.FILES), "a results file without a namespace in names.py, or the reverse"
    wrong = [f"class {space.__name__} ({file}): {line}" for file, space in NAMESPACES.items()
             for line in names_mismatch(space, list(columns.FILES[file]))]
    assert wrong == [], "harness/measure/columns/names.py:\n" + "\n".join(wrong)


def test_a_names_mismatch_is_seen_both_ways():
    class Planted(names.Leading):
        stale_ms = "stale_ms"  # held, not declared
        scenario = "secnario"  # held under its name, misspelt
    declared = [a for a in dir(names.Leading) if not a.startswith("_")] + ["brand_new_ms"]  # one not held
    assert names_mismatch(Planted, declared) == ['add    brand_new_ms = "brand_new_ms"', "remove stale_ms",
                                                 "fix    scenario = 'secnario'"]


def test_a_number_with_anything_after_it_is_damage_not_its_prefix():
    """A cell is a number only whole: `12ab` is not 12, `1.5.2` not 1.5 (a regex that matched a prefix took them)."""
    from harness.measure.columns.results import RESULTS

    for cell in ("12ab", "1.5.2", "3e", "12 ", "1,5", "0x10"):
        assert RESULTS["latency_ms_mean"].problem(cell) == f"{cell!r} is not a finite number (ms) of 0 or more", cell
    for cell in ("8x", "4.0"):
        assert RESULTS["batch_size"].problem(cell) is not None, cell
    assert RESULTS["latency_ms_mean"].problem("321.8") is None and RESULTS["batch_size"].problem("8") is None

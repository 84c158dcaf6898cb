"""A results folder cut at every byte offset (what a kill or a full disk during a write leaves, and worse) is never
read as data: `--resume` keeps exactly the whole rows and sets the rest aside, `python -m plots`' reader and
`--calibrate` use exactly the whole rows and say what they left out (docs/measurement.md, "Files are data with
integrity"). The property holds at every offset of a small results.csv, not at a few chosen ones."""

import contextlib
import io
import shutil

import pytest

from app.cli import read_results_csv
from harness.measure.annotations import Annotations
from harness.measure.columns.readback import read_back
from harness.measure.columns.results import RESULTS
from harness.measure.explain import RooflineFigures
from harness.measure.records import BatchSample, PointResult, RunContext
from harness.measure.sink import result_row
from harness.measure.writers import ResultsDir, row_key
from harness.model.roofline import ROOFLINE_COLUMNS
from harness.plan.forecast import calibrate
from harness.plan.points import SweepPoint
from plots import load

CONTEXT = RunContext("cut", "hf", "tiny-llama", "fp32", "cpu", 1, 1)


def point(batch_size: int, latency_ms: float) -> PointResult:
    samples = tuple(BatchSample(i, latency_ms + i, latency_ms / 4, latency_ms / 40, (16,) * batch_size,
                                (8,) * batch_size) for i in range(2))
    return PointResult(CONTEXT, SweepPoint(16, 8, batch_size), "ok", samples=samples)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A results folder of three points written by the writers, every roofline figure filled (what --calibrate
    needs): the original every cut is compared with."""
    folder = tmp_path_factory.mktemp("whole")
    out = ResultsDir(folder)
    out.open(resume=False)
    notes = Annotations(roofline=RooflineFigures(dict.fromkeys(ROOFLINE_COLUMNS, 1.0)))
    for batch_size, latency in ((1, 321.8), (2, 402.5), (4, 655.0)):
        result = point(batch_size, latency)
        out.write_point(result, result_row(result, None, notes))
    return folder


def line_ends(data: bytes):
    """Byte offsets just past each line end: a cut at or after one keeps that line whole."""
    return [i + 1 for i, b in enumerate(data) if b == ord("\n")]


def whole_rows_within(data: bytes, cut: int, rows):
    """The rows a file cut to `cut` bytes still holds whole (the header is the first line)."""
    ends = [e for e in line_ends(data) if e <= cut]
    return rows[:max(0, len(ends) - 1)]


def test_the_reader_keeps_exactly_the_whole_rows_at_every_cut(whole, tmp_path):
    data = (whole / "results.csv").read_bytes()
    rows = read_back(whole / "results.csv", RESULTS).rows
    assert len(rows) == 3 and rows[0]["latency_ms_mean"] == "322.3"
    path = tmp_path / "results.csv"
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        found = read_back(path, RESULTS)
        assert found.rows == whole_rows_within(data, cut, rows), cut
        partial = cut not in (0, *line_ends(data))
        assert len(found.damaged) == int(partial), cut  # a cut inside a line is that line, named
        assert found.sound_text.encode() + b"".join(d.text.encode() for d in found.damaged) == data[:cut]


def test_resume_keeps_the_whole_rows_and_sets_the_partial_one_aside_at_every_cut(whole, tmp_path):
    data = (whole / "results.csv").read_bytes()
    rows = read_back(whole / "results.csv", RESULTS).rows
    samples = (whole / "samples.csv").read_bytes()
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    header_end = line_ends(data)[0]  # a cut inside the header: every offset is the reader's test above; some here
    for cut in [*range(0, header_end, 97), *range(header_end, len(data) + 1)]:
        (folder / "results.csv").write_bytes(data[:cut])
        (folder / "samples.csv").write_bytes(samples)
        (folder / "results.csv.damaged").unlink(missing_ok=True)
        out = ResultsDir(folder)
        done = out.open(resume=True)
        kept = whole_rows_within(data, cut, rows)
        assert done == {row_key(r) for r in kept}, cut
        assert read_back(folder / "results.csv", RESULTS).rows == kept
        aside = folder / "results.csv.damaged"
        assert aside.exists() == (len(out.set_aside) == 1), cut
        if out.set_aside:  # the partial bytes kept as they were, after a line saying where they were
            assert aside.read_bytes().endswith(data[len(data[:cut]) - len(data[:cut].split(b"\n")[-1]):cut] + b"\n")
        # samples of points without a whole results row are dropped: their points run again
        assert {row_key(r) for r in read_back(folder / "samples.csv", {}).rows} == done


def test_plots_and_calibrate_use_only_the_whole_rows_at_every_cut(whole, tmp_path):
    data = (whole / "results.csv").read_bytes()
    rows = read_back(whole / "results.csv", RESULTS).rows
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    header_end = line_ends(data)[0]
    for cut in range(header_end, len(data) + 1):
        (folder / "results.csv").write_bytes(data[:cut])
        kept = whole_rows_within(data, cut, rows)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            table = load.read_results(folder)
            header, calibrated = read_results_csv(folder / "results.csv")
        assert list(table["latency_ms_mean"]) == [r["latency_ms_mean"] for r in kept], cut
        assert calibrated == kept, cut
        said = err.getvalue()
        assert ("left out" in said) == (cut not in line_ends(data)), cut
        if kept and cut in line_ends(data):  # a forecast from the whole rows alone (the rows it reads: above)
            assert calibrate([folder], read_results_csv).curves

"""plots: pure data functions on synthetic tables, every chart from the committed CPU fixture, hardware
comparison across two folders, and the CLI's one-line errors with exit code 2."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from plots import charts, data, style
from plots.__main__ import main
from plots.errors import PlotError
from plots.labels import PointLabel, place_point_labels
from plots.load import load_results, to_numbers
from plots.report import make_report

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "cpu-tiny"
CPU = "AMD EPYC (2 cores)"
A100 = "NVIDIA A100-SXM4-80GB"


def synthetic(rows):
    """A text table like results.csv from (hardware, batch_size, latency_ms, throughput, status) tuples."""
    return pd.DataFrame([
        {"benchmark_name": "b", "backend": "hf", "model": "m", "dtype": "bf16", "hardware": hw, "num_devices": "1",
         "tp_size": "1", "workload": "random", "batch_size": str(bs), "input_length": "128", "output_length": "64",
         "status": status, "latency_ms_mean": str(lat), "throughput_tokens_per_s": str(tput), "source": "run"}
        for hw, bs, lat, tput, status in rows
    ])


def copy_fixture(tmp_path, name, hardware=None, speedup=1.0, status=None):
    """The CPU fixture copied, optionally relabelled as other hardware with every latency `speedup` x lower."""
    folder = tmp_path / name
    shutil.copytree(FIXTURE, folder)
    table = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    if hardware:
        table["hardware"] = hardware
        for column in [c for c in table.columns if c.endswith(("_mean", "_p50", "_p90", "_p99", "_std"))]:
            table[column] = pd.to_numeric(table[column]) / speedup
        for column in ("throughput_tokens_per_s", "prefill_tokens_per_s"):
            table[column] = pd.to_numeric(table[column]) * speedup
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["hardware"]["gpus"] = [{"name": hardware, "memory_bytes": 85899345920}]
        (folder / "manifest.json").write_text(json.dumps(manifest))
    if status:
        table["status"] = status
    table.to_csv(folder / "results.csv", index=False)
    return folder


# -- pure functions -----------------------------------------------------------------------------------

def test_pareto_frontier_keeps_only_undominated_points_in_latency_order():
    latency_ms = [10, 20, 15, 30, 40, 40, 5]
    throughput = [100, 300, 50, 250, 400, 350, 20]
    assert data.pareto_frontier(latency_ms, throughput).tolist() == [6, 0, 1, 4]


def test_pareto_frontier_ties_and_nans():
    assert data.pareto_frontier([10, 10, float("nan")], [5, 7, 99]).tolist() == [1]
    assert data.pareto_frontier([], []).tolist() == []


def test_default_series_is_one_per_hardware_labelled_by_what_differs():
    table = synthetic([(CPU, 1, 10, 100, "ok"), (CPU, 4, 20, 200, "ok"), (A100, 1, 2, 500, "ok"),
                       (A100, 4, 3, 1300, "oom")])
    labelled = data.with_series(table)
    assert labelled["series"].tolist() == [CPU, CPU, A100, A100]
    assert data.series_order(labelled) == [CPU, A100]


def test_single_series_is_labelled_by_hardware_and_backend():
    labelled = data.with_series(synthetic([(CPU, 1, 10, 100, "ok")]))
    assert labelled["series"].tolist() == [f"{CPU} · hf"]


def test_series_columns_add_a_disambiguator_when_points_repeat():
    table = synthetic([(CPU, 1, 10, 100, "ok"), (CPU, 1, 11, 90, "ok")])
    table.loc[1, "source"] = "run2"
    assert data.series_columns(table, ["backend"])[-1] == "source"
    assert data.with_series(table, ["backend"])["series"].tolist() == ["run", "run2"]


def test_two_runs_in_folders_named_alike_stay_two_series(tmp_path):
    """h200-20261126/headline and h200-20261127/headline: each run is named by its path from the common parent, so
    neither the default series nor --series backend,source joins them into one zig-zag curve."""
    first = copy_fixture(tmp_path / "h200-20261126", "headline")
    second = copy_fixture(tmp_path / "h200-20261127", "headline", speedup=2.0)
    rows = load_results([first, second])
    assert set(rows["source"]) == {"h200-20261126/headline", "h200-20261127/headline"}
    for series in (None, ["backend", "source"]):
        table = data.with_series(rows, series)
        assert table.groupby("series")["source"].nunique().max() == 1, series
        assert table["series"].nunique() == 2 * data.with_series(load_results([first]), series)["series"].nunique()
    assert load_results([first])["source"].unique().tolist() == ["headline"]  # one run: its folder's name
    from plots.html.rows import hover_text  # report.html's tooltip says which run a point is from

    hovered = hover_text(to_numbers(data.with_series(rows)).iloc[-1])
    assert "<br>run h200-20261127/headline<br>" in hovered


def test_build_curves_follow_batch_size_and_drop_nan():
    table = to_numbers(data.with_series(synthetic(
        [(CPU, 4, 20, 200, "ok"), (CPU, 1, 10, 100, "ok"), (A100, 1, 2, "", "ok"), (A100, 2, 3, 600, "ok")])))
    curves = data.build_curves(table, "latency_ms_mean", "throughput_tokens_per_s", order_by="batch_size")
    assert [(c.name, c.x, c.y, c.batch_sizes) for c in curves] == [
        (CPU, (10.0, 20.0), (100.0, 200.0), (1, 4)), (A100, (3.0,), (600.0,), (2,))]


def test_where_filters_text_values_and_rejects_unknown_columns():
    table = synthetic([(CPU, 1, 10, 100, "ok"), (CPU, 4, 20, 200, "ok"), (A100, 16, 2, 500, "ok")])
    assert data.apply_where(table, {"batch_size": "1,16"})["batch_size"].tolist() == ["1", "16"]
    with pytest.raises(PlotError, match="unknown column 'colour'"):
        data.apply_where(table, {"colour": "red"})
    with pytest.raises(PlotError, match="no rows match"):
        data.apply_where(table, {"backend": "vllm"})
    with pytest.raises(PlotError, match="expected key=value"):
        data.parse_where(["backend"])


def test_all_oom_is_not_plottable_and_says_why():
    table = synthetic([(CPU, 1, "", "", "oom"), (CPU, 2, "", "", "skipped"), (CPU, 4, "", "", "skipped")])
    with pytest.raises(PlotError, match=r"none of the 3 points ended ok \(2 skipped, 1 oom\)"):
        data.require_plottable(table)


def test_dropped_points_are_described_per_series():
    table = data.with_series(synthetic([(CPU, 64, "", "", "oom"), (A100, 128, "", "", "skipped")]))
    assert data.describe_dropped(data.dropped(table)) == [f"{CPU}: bs 64 (oom)", f"{A100}: bs 128 (skipped)"]


def test_point_labels_never_overlap_at_seven_batch_sizes_and_two_series():
    batch_sizes = [1, 2, 4, 8, 16, 32, 64]
    fig, ax = style.new_figure()
    labels = []
    for speed in (1.0, 1.3):  # two close curves: the crowded case
        x = [speed * (5 + 1.5 * b) for b in batch_sizes]
        y = [b * 1000 / xi for b, xi in zip(batch_sizes, x)]
        ax.plot(x, y, marker="o")
        labels += [PointLabel(xi, yi, str(b), "k") for xi, yi, b in zip(x, y, batch_sizes)]
    ax.set_xscale("log")
    drawn = place_point_labels(ax, labels)
    renderer = fig.canvas.get_renderer()
    boxes = [a.get_window_extent(renderer) for a in drawn]
    assert len(drawn) >= 12
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


# -- rendering from results on disk ------------------------------------------------------------------

@pytest.mark.engine
def test_two_hardware_folders_give_one_curve_each_on_the_same_axes(tmp_path, monkeypatch):
    cpu, gpu = FIXTURE, copy_fixture(tmp_path, "a100", hardware=A100, speedup=10.0)
    table = to_numbers(data.with_series(load_results([cpu, gpu])))
    rows = table[(table["input_length"] == 128) & (table["output_length"] == 64)]
    curves = data.build_curves(rows, "latency_ms_mean", "throughput_tokens_per_s", order_by="batch_size")
    assert [c.name for c in curves] == [CPU, A100]
    assert [c.batch_sizes for c in curves] == [(1, 4, 16), (1, 4, 16)]
    assert curves[1].y[0] == pytest.approx(10 * curves[0].y[0])

    legends = {}
    real_save = style.save

    def save_and_record(fig, out_dir, stem, formats):
        legends[stem] = [t.get_text() for lg in [*fig.legends, *(a.get_legend() for a in fig.axes)] if lg
                         for t in lg.get_texts()]
        return real_save(fig, out_dir, stem, formats)

    monkeypatch.setattr(style, "save", save_and_record)
    monkeypatch.setattr(charts, "MAX_DRAWING_PROCESSES", 1)  # draw here, where the recording save is
    set_status(gpu, "oom", batch_size="16", input_length="512")
    text = make_report([cpu, gpu], tmp_path / "out").read_text()
    assert {CPU, A100} <= set(legends["latency_vs_throughput_in128_out64"])
    assert {CPU, A100} <= set(legends["throughput_vs_batch_size"])
    assert {"ttft_vs_input_length_amd-epyc-2-cores", "ttft_vs_input_length_nvidia-a100-sxm4-80gb"} <= set(legends)
    # The oom points: out of the curves, named in the captions and in the report's list.
    assert f"*Left out (status not ok): {A100}: bs 16 (oom)*" in text
    assert f"- {A100}: bs 16 @ in 512/out 64 (oom)" in text
    assert f"| {A100} | 512 | 64 | 2 of 3 |" in text


def set_status(folder, status, **where):
    table = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    mask = pd.Series(True, index=table.index)
    for column, value in where.items():
        mask &= table[column] == value
    table.loc[mask, "status"] = status
    table.to_csv(folder / "results.csv", index=False)


# -- the command line -----------------------------------------------------------------------------------

def run_plots(*args):
    return subprocess.run([sys.executable, "-m", "plots", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def assert_one_line_error(result, fragment):
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_all_oom_exits_2_with_one_line(tmp_path):
    folder = copy_fixture(tmp_path, "oom", status="oom")
    assert_one_line_error(run_plots(folder), "nothing to plot: none of the 12 points ended ok (12 oom)")
    assert not (folder / "plots").exists()


@pytest.mark.engine
def test_cli_draws_every_chart_and_the_report_into_the_results_folder(tmp_path):
    folder = copy_fixture(tmp_path, "run")
    result = run_plots(folder, "--format", "png,svg")
    assert result.returncode == 0, result.stderr
    report = folder / "plots" / "report.md"
    assert str(report) in result.stdout
    names = {p.name for p in report.parent.iterdir()}
    expected = ["latency_vs_throughput_in128_out1", "latency_vs_throughput_in128_out64",
                "latency_vs_throughput_in512_out1", "latency_vs_throughput_in512_out64",
                "latency_vs_output_length_amd-epyc-2-cores-hf_in128", "latency_vs_output_length_amd-epyc-2-cores-hf_in512",
                "ttft_vs_input_length_amd-epyc-2-cores-hf", "tpot_vs_batch_size", "throughput_vs_batch_size",
                "per_gpu_vs_per_user_batch_in128_out64", "per_gpu_vs_per_user_batch_in512_out64"]
    assert names == {"report.md", "report.html", "plotly.min.js"} | {f"{stem}.{ext}" for stem in expected
                                                                  for ext in ("png", "svg")}
    assert all((report.parent / n).stat().st_size > 10_000 for n in names if n.endswith(".png"))
    text = report.read_text()
    assert all(f"]({stem}.png)" in text for stem in expected)
    # Results from before the roofline columns: MBU, MFU, x roofline and cost read "-".
    assert f"| {CPU} · hf | 128 | 64 | 3 of 3 | 2,057 | 16 | 498 | 7.40 | - | - | - | - | 1 | 289 | 6.25 |" in text


@pytest.mark.parametrize("make_args, fragment", [
    (lambda d: [d / "missing", "--out", d / "out"], "no such file or folder"),
    (lambda d: [d, "--out", d / "out"], "no results.csv in this folder"),
    (lambda d: [d / "empty", "--out", d / "out"], "no whole result rows"),
    (lambda d: [FIXTURE, "--out", d / "out", "--series", "colour"], "--series: unknown column 'colour'"),
    (lambda d: [FIXTURE, "--out", d / "out", "--where", "batch_size"], "expected key=value"),
    (lambda d: [FIXTURE, "--out", d / "out", "--where", "colour=red"], "unknown column 'colour'"),
    (lambda d: [FIXTURE, "--out", d / "out", "--format", "gif"], "--format gif"),
    (lambda d: [FIXTURE, FIXTURE / "results.csv"], "pass --out DIR"),
    (lambda d: [], "the following arguments are required: results"),
])
def test_cli_bad_input_is_one_error_line_and_exit_2(tmp_path, capsys, make_args, fragment):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "results.csv").write_text((FIXTURE / "results.csv").read_text().splitlines()[0] + "\n")
    assert main([str(a) for a in make_args(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "out").exists()


def test_chart_file_names_stay_unique_per_series():
    from plots.charts import unique_slugs

    assert unique_slugs(["A100 · hf", "A100 / hf", "H100"]) == {"A100 · hf": "a100-hf", "A100 / hf": "a100-hf-2",
                                                                "H100": "h100"}

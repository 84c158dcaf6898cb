"""The headline view (plots/headline.py, plots/headline_chart.py): tokens/s per GPU against tokens/s per user, its
frontier over every series, the SLO line, one chart per workload, and the charts of two results folders together."""

import pandas as pd
import pytest

from harness.measure.columns.names import R
from plots import charts, data, headline, style
from plots.load import load_results, to_numbers
from plots.report import make_report
from tests.test_plots import A100, CPU, FIXTURE, copy_fixture, run_plots


def table(rows):
    """Numeric rows of (series, scenario, batch size, rate, per-user speed, per-GPU speed)."""
    return pd.DataFrame([{data.SERIES: s, R.scenario: sc, R.batch_size: b, R.request_rate: r, R.input_length: 128,
                          R.output_length: 64, headline.PER_USER: u, headline.PER_GPU: g}
                         for s, sc, b, r, u, g in rows])


def test_the_frontier_keeps_what_no_point_beats_on_both_speeds_across_series():
    rows = table([("a", "batch", 1, None, 100.0, 50.0), ("a", "batch", 8, None, 60.0, 300.0),
                  ("b", "batch", 1, None, 90.0, 40.0), ("b", "batch", 8, None, 70.0, 320.0),
                  ("b", "batch", 16, None, 30.0, 310.0)])  # slower for users than a-8 and no more per GPU
    front = headline.frontier(rows)
    assert list(zip(front[data.SERIES], front[R.batch_size])) == [("b", 8), ("a", 1)]


def test_speeds_of_results_written_before_the_columns_follow_the_definitions():
    old = pd.DataFrame({R.scenario: ["batch", "stream"], R.throughput_tokens_per_s: [800.0, 90.0],
                        R.num_devices: [4, 2], R.tpot_ms_mean: [20.0, 99.0], R.tpot_ms_p50: [21.0, 25.0]})
    speeds = headline.with_speeds(old)
    assert list(speeds[headline.PER_GPU]) == [200.0, 45.0]
    assert list(speeds[headline.PER_USER]) == [50.0, 40.0]  # batch: 1000 / mean TPOT; stream: / median TPOT
    given = old.assign(**{headline.PER_USER: [51.0, None], headline.PER_GPU: [199.0, None]})
    assert list(headline.with_speeds(given)[headline.PER_USER]) == [51.0, 40.0]  # a row's own value stands


def test_loads_label_the_points_and_the_slo_is_a_per_user_speed():
    batch, stream = pd.Series({R.scenario: "batch", R.batch_size: 16}), pd.Series(
        {R.scenario: "stream", R.request_rate: 4.0, R.max_concurrency: 8})
    assert (headline.point_label(batch), headline.point_label(stream)) == ("16", "4/s c8")
    streams = pd.DataFrame({R.slo_tpot_ms: [50.0, 50.0]})
    assert headline.slo_per_user(streams) == (50.0, 20.0)
    assert headline.slo_per_user(streams, slo_tpot_ms=25.0) == (25.0, 40.0)
    assert headline.slo_per_user(pd.DataFrame({R.slo_tpot_ms: [50.0, 80.0]})) is None  # no one target


def test_two_folders_draw_one_chart_per_workload_with_each_hardware_and_the_slo(tmp_path, monkeypatch):
    gpu = copy_fixture(tmp_path, "a100", hardware=A100, speedup=10.0)
    drawn = {}
    real_save = style.save

    def save_and_record(fig, out_dir, stem, formats):
        ax = fig.axes[0]
        drawn[stem] = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
        return real_save(fig, out_dir, stem, formats)

    monkeypatch.setattr(style, "save", save_and_record)
    monkeypatch.setattr(charts, "MAX_DRAWING_PROCESSES", 1)  # draw here, where the recording save is
    report = make_report([FIXTURE, gpu], tmp_path / "out", slo_tpot_ms=2.0).read_text()
    ok = to_numbers(load_results([FIXTURE]))
    pairs = {(i, o) for i, o in zip(ok[R.input_length], ok[R.output_length]) if o > 1}  # one token: no TPOT
    assert {s for s in drawn if s.startswith("per_gpu_vs_per_user")} == {
        f"per_gpu_vs_per_user_batch_in{i}_out{o}" for i, o in pairs}
    lines = drawn["per_gpu_vs_per_user_batch_in128_out64"]
    (cpu_x, cpu_y), (gpu_x, gpu_y) = lines[CPU], lines[A100]
    assert gpu_x == pytest.approx([10 * x for x in cpu_x]) and gpu_y == pytest.approx([10 * y for y in cpu_y])
    assert lines["frontier (all series)"] == (gpu_x[::-1], gpu_y[::-1])  # the faster machine beats every CPU point
    assert lines["SLO: TPOT 2 ms (500 tokens/s)"][0] == [500.0, 500.0]
    assert "## Throughput per GPU vs speed per user" in report


def test_a_bad_slo_is_one_line():
    result = run_plots(FIXTURE, "--out", "/nonexistent/never", "--slo-tpot-ms", "0")
    assert result.returncode == 2 and result.stderr == (
        "error: argument --slo-tpot-ms: must be a finite number (ms) above 0, got '0'\n")

"""The best configuration at the targets (plots/best/, docs/guides/best.md): folders built where the answer is known,
each answer checked in report.md, the console's lines and `--best --format json` alike; targets from the sweep
(`target`, a stream's slo) and from flags; every bad target one line."""

import json

import pandas as pd
import pytest

from app.cli import main as benchmark_main
from harness.measure.writers import RESULT_COLUMNS
from plots.__main__ import main as plots_main
from plots.report import make_report

COMMON = {"benchmark_name": "b", "model": "m", "dtype": "bf16", "tp_size": 1, "workload": "random", "input_length": 128,
          "output_length": 64, "scenario": "batch", "latency_ms_mean": 100.0, "ttft_ms_mean": 10.0,
          "tpot_ms_mean": 5.0}


def point(backend, hardware, batch_size, per_gpu, low, high, tpot_p99, devices=1, status="ok", **more):
    return {**COMMON, "backend": backend, "hardware": hardware, "num_devices": devices, "batch_size": batch_size,
            "status": status, "throughput_tokens_per_s": per_gpu * devices, "output_tokens_per_s_per_gpu": per_gpu,
            "throughput_tokens_per_s_ci95_low": low * devices, "throughput_tokens_per_s_ci95_high": high * devices,
            "tpot_ms_p99": tpot_p99, "ttft_ms_p99": 50.0, "output_tokens_per_s_per_user": 1000 / tpot_p99, **more}


def folder(path, rows, config=None):
    path.mkdir(parents=True)
    pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(path / "results.csv", index=False)
    (path / "manifest.json").write_text(json.dumps({"config": config or {}}))
    return path


def best_json(capsys, *args):
    assert plots_main([*map(str, args), "--best", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


CPU = "AMD EPYC (2 cores)"
# vllm is the fastest that meets TPOT p99 <= 20 ms (bs 4); its bs 16 is faster still but misses; hf's best is bs 8.
RUNS = [point("hf", CPU, 1, 300, 290, 310, 6.0), point("hf", CPU, 8, 800, 780, 820, 15.0),
        point("hf", CPU, 16, 1200, 1150, 1250, 30.0),
        point("vllm", CPU, 4, 1000, 950, 1050, 18.0), point("vllm", CPU, 16, 2000, 1900, 2100, 40.0),
        point("vllm", CPU, 32, 0, 0, 0, 1.0, status="oom")]


def test_the_fastest_configuration_that_meets_the_target_wins_with_its_runner_up(tmp_path, capsys):
    run = folder(tmp_path / "run", RUNS)
    (answer,) = best_json(capsys, run, "--tpot-ms", 20)
    assert (answer["best"]["configuration"], answer["best"]["load"]) == ("vllm", "bs 4")
    assert answer["best"]["output_tokens_per_s_per_gpu"] == 1000 and answer["best"]["judged"] == {"TPOT p99": 18.0}
    assert (answer["runner_up"]["configuration"], answer["runner_up"]["load"]) == ("hf", "bs 8")
    assert answer["margin_beyond_intervals"] is True and answer["met_by_none"] is None
    assert answer["targets_from"] == "none stated by the sweep, with --tpot-ms" and answer["points_considered"] == 5
    # the same answer in the console's words and in report.md's first section
    assert plots_main([str(run), "--best", "--tpot-ms", "20"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line == ("  m, batch, input 128 / output 64, AMD EPYC (2 cores): vllm at bs 4, 1,000 tokens/s per GPU; "
                    "runner-up hf at bs 8, 800 (beyond both intervals)")
    report = make_report([run], tmp_path / "plots", targets={"tpot_ms": 20.0}).read_text()
    section = report[report.index("## The best configuration at your targets"):]
    assert ("| m | batch | 128 | 64 | AMD EPYC (2 cores) | vllm | bs 4 | 1,000 (950-1,050) | - | hf at bs 8 | 800 | "
            "beyond the intervals |") in section
    assert report.index("## The best configuration") < report.index("## Summary")


def test_a_margin_inside_both_intervals_is_called_a_tie(tmp_path, capsys):
    rows = [point("hf", CPU, 8, 950, 900, 1000, 15.0), point("vllm", CPU, 4, 1000, 940, 1060, 18.0)]
    (answer,) = best_json(capsys, folder(tmp_path / "run", rows), "--tpot-ms", 20)
    assert answer["best"]["configuration"] == "vllm" and answer["margin_beyond_intervals"] is False


def test_when_nothing_meets_the_targets_the_closest_point_says_what_it_misses(tmp_path, capsys):
    (answer,) = best_json(capsys, folder(tmp_path / "run", RUNS), "--tpot-ms", 5, "--ttft-ms", 40)
    assert answer["best"] is None and answer["runner_up"] is None
    missed = answer["met_by_none"]
    assert (missed["closest"]["configuration"], missed["closest"]["load"]) == ("hf", "bs 1")
    assert missed["misses"] == ["TTFT p99 50.0 ms against 40.0 ms (25% over)",
                                "TPOT p99 6.00 ms against 5.00 ms (20% over)"]


def test_a_point_with_invalid_answers_is_never_the_best(tmp_path, capsys):
    """Answers held to a schema or tools (invalid_answer_share measured): a point with any invalid is out, stated
    targets or not; the one closest says how many were invalid."""
    rows = [point("guided", CPU, 4, 900, 880, 920, 18.0, invalid_answer_share=0.0),
            point("unguided", CPU, 4, 1500, 1480, 1520, 12.0, invalid_answer_share=1.0)]
    (answer,) = best_json(capsys, folder(tmp_path / "run", rows))
    assert answer["best"]["configuration"] == "guided" and answer["runner_up"] is None
    (answer,) = best_json(capsys, folder(tmp_path / "none", rows[1:]))
    assert answer["best"] is None and answer["met_by_none"]["misses"] == ["invalid answers 100%, none allowed"]


def test_each_hardware_gets_its_answer_and_then_all_of_them(tmp_path, capsys):
    h100 = [point("vllm", "NVIDIA H100", 64, 3000, 2900, 3100, 19.0, devices=2, cost_per_million_output_tokens=0.2)]
    runs = [folder(tmp_path / "runs" / "cpu", RUNS), folder(tmp_path / "runs" / "h100", h100)]
    answers = best_json(capsys, *runs, "--tpot-ms", 20)
    assert [(a["hardware"], a["best"]["configuration"]) for a in answers] == [
        (CPU, "AMD EPYC (2 cores) · vllm · 1 device"), ("NVIDIA H100", "NVIDIA H100 · vllm · 2 devices"),
        ("all hardware", "NVIDIA H100 · vllm · 2 devices")]
    assert answers[2]["runner_up"]["configuration"] == "AMD EPYC (2 cores) · vllm · 1 device"
    assert answers[1]["best"]["cost_per_million_output_tokens"] == 0.2
    # a cost ceiling the CPU cannot state (no cost_per_hour): only the H100 can meet it
    answers = best_json(capsys, *runs, "--tpot-ms", 20, "--max-cost-per-m-tokens", 1)
    assert answers[0]["best"] is None and answers[0]["met_by_none"]["misses"] == [
        "cost per million output tokens: not measured"]
    assert answers[2]["best"]["hardware"] == "NVIDIA H100"


def test_the_sweeps_own_targets_are_used_and_flags_override_them(tmp_path, capsys):
    stream = {"scenario": "stream", "stream": {"slo": {"ttft_ms": 2000.0, "tpot_ms": 20.0, "percentile": 99.0}}}
    run = folder(tmp_path / "run", RUNS, config=stream)
    (answer,) = best_json(capsys, run)
    assert answer["targets_from"] == "the sweep's own" and answer["targets"]["tpot_ms"] == 20.0
    assert answer["best"]["configuration"] == "vllm"
    (answer,) = best_json(capsys, run, "--tpot-ms", 100)
    assert answer["targets"]["tpot_ms"] == 100 and answer["best"]["load"] == "bs 16"
    targeted = folder(tmp_path / "target", RUNS, config={"scenario": "batch", "target": {"tpot_ms": 16.0}})
    (answer,) = best_json(capsys, targeted)
    assert (answer["best"]["configuration"], answer["best"]["load"]) == ("hf", "bs 8")


def test_without_targets_the_fastest_point_wins(tmp_path, capsys):
    run = folder(tmp_path / "run", RUNS)
    (answer,) = best_json(capsys, run)
    assert answer["targets_from"] == "none stated by the sweep" and answer["best"]["load"] == "bs 16"
    assert plots_main([str(run), "--best"]) == 0
    assert capsys.readouterr().out.startswith("Best configuration (no targets stated, so the fastest point wins;")


@pytest.mark.parametrize("args, says", [
    (["--best", "--percentile", "95"], "argument --percentile: must be one of 50, 90, 99, got '95'"),
    (["--best", "--tpot-ms", "-1"], "argument --tpot-ms: must be a finite number (ms) above 0, got '-1'"),
    (["--best", "--ttft-ms", "nan"], "argument --ttft-ms: must be a finite number (ms) above 0, got 'nan'"),
    (["--best", "--max-accuracy-drop", "inf"], "argument --max-accuracy-drop: must be a finite number (share) above 0, "
                                               "got 'inf'"),
    (["--best", "--format", "png"], "--format png: with --best, choose text or json"),
])
def test_a_bad_flag_is_one_line(tmp_path, capsys, args, says):
    run = folder(tmp_path / "run", RUNS)
    assert plots_main([str(run), *args]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {says}\n"


@pytest.mark.parametrize("target, says", [
    ("x", "manifest.json: config.target: expected a mapping of ttft_ms, tpot_ms, percentile, min_user_tokens_per_s, "
          "max_cost_per_m_tokens, max_accuracy_drop, got 'x'"),
    ({"tpot": 5}, "manifest.json: config.target.tpot: unknown key; allowed: ttft_ms, tpot_ms, percentile, "
                  "min_user_tokens_per_s, max_cost_per_m_tokens, max_accuracy_drop"),
    ({"tpot_ms": -5}, "manifest.json: config.target.tpot_ms: must be a finite number above 0, got -5"),
    ({"tpot_ms": "fast"}, "manifest.json: config.target.tpot_ms: must be a finite number above 0, got 'fast'"),
    ({"percentile": 95}, "manifest.json: config.target.percentile: 95 is not one of 50, 90, 99"),
])
def test_a_damaged_target_in_a_manifest_is_one_line(tmp_path, capsys, target, says):
    run = folder(tmp_path / "run", RUNS, config={"target": target})
    assert plots_main([str(run), "--best"]) == 2
    assert capsys.readouterr().err == f"error: {says}\n"


@pytest.mark.parametrize("section, says", [
    ("{percentile: 95}", "target.percentile: 95 is not one of 50, 90, 99 (the percentiles results.csv holds)"),
    ("{tpot_ms: -1}", "target.tpot_ms: must be a finite number of ms > 0, got -1"),
    ("{tpot_ms: .nan}", "target.tpot_ms: must be a finite number of ms > 0, got nan"),
    ("{max_accuracy_drop: 2}", "target.max_accuracy_drop: must be a finite number in (0, 1], got 2"),
    ("{tpot: 5}", "target.tpot: unknown key"),
    ("fast", "target: expected a mapping"),
])
def test_a_bad_target_section_is_one_line(tmp_path, capsys, section, says):
    yaml = tmp_path / "sweep.yaml"
    yaml.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, weights: random}\nbackends: [{name: synthetic}]\n"
                    "batch_sizes: [1]\n"
                    f"input_lengths: [8]\noutput_lengths: [4]\ntarget: {section}\n")
    assert benchmark_main([str(yaml), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {says}"), err

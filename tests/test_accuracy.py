"""The `accuracy` section without an engine: its intervals against published values, exact match, the task file's
and the section's bad input (one line, exit 2, before any engine), and the engine shape widened for its batches.
End to end, on a trained model: tests/test_accuracy_e2e.py."""

import json

import pytest

from app.cli import main
from harness.measure.quality import accuracy_cells, pooled
from harness.measure.stats import difference, wilson
from harness.scenarios.accuracy import AccuracyTask, TaskScore, answered

EXAMPLES = [{"prompt": "reverse 123", "answer": "321"}, {"prompt": "sort 312", "answer": "123"}]
SWEEP = """
benchmark_name: accuracy
model: {{preset: tiny-llama, weights: random, dtype: fp32}}
backends: [{{name: hf, device: cpu}}]
batch_sizes: [1]
input_lengths: [8]
output_lengths: [4]
accuracy: {{tasks: [{tasks}]{extra}}}
"""
NONE = ", template: none"  # tiny-llama's tokenizer has no chat template


def write_task(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def refused(tmp_path, capsys, tasks: str, extra: str = NONE, sweep: str = SWEEP) -> str:
    yaml = tmp_path / "sweep.yaml"
    yaml.write_text(sweep.format(tasks=tasks, extra=extra))
    assert main([str(yaml), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err[len("error: "):-1]


def test_wilson_and_newcombe_match_newcombes_published_examples():
    # Newcombe (1998), Statistics in Medicine 17: 81/263 -> 0.2553-0.3662 (single proportion, his method 3), and
    # 56/70 - 48/80 = 0.2000 with 0.0524 to 0.3339 (difference of independent proportions, his method 10).
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert difference(56, 70, 48, 80) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4) and wilson(10, 10)[1] == pytest.approx(1.0)
    low, high = difference(5, 10, 5, 10)[1:]
    assert low < 0 < high and low == pytest.approx(-high)


def test_an_answer_counts_only_when_its_tokens_end_at_eos_or_at_the_budget():
    eos = (2,)
    assert answered([7, 8, 2], [7, 8], eos) and answered([7, 8], [7, 8], eos)
    assert not answered([7, 8, 9], [7, 8], eos)  # went on past the answer
    assert not answered([7, 2], [7, 8], eos) and not answered([8, 7, 2], [7, 8], eos)
    assert not answered([2], [7], eos)


def test_batches_budget_each_answer_and_its_eos():
    task = AccuracyTask("t", "t.jsonl", ((1, 5), (1, 6, 6), (1, 7)), ((9,), (9, 9, 9), (8, 8)), (2,))
    batches = list(task.batches(2))
    assert [start for start, _ in batches] == [0, 2]
    assert [b.max_tokens for _, b in batches] == [(2, 4), (3,)] and not batches[0][1].forced
    assert batches[0][1].sampling.greedy and (task.longest_prompt, task.longest_answer) == (3, 4)


def test_row_cells_pool_every_task():
    both = pooled([TaskScore("a", 10, 3), TaskScore("b", 30, 27)])
    assert (both.task, both.examples, both.correct) == ("a+b", 40, 30)
    cells = accuracy_cells(both)
    assert cells["accuracy"] == 0.75 and cells["accuracy_examples"] == 40
    assert (cells["accuracy_ci95_low"], cells["accuracy_ci95_high"]) == wilson(30, 40)
    assert accuracy_cells(None) == {} and pooled([]) is None


def test_a_task_file_is_read_and_tokenized_for_the_plan(tmp_path, capsys):
    tasks = write_task(tmp_path / "digits.jsonl", EXAMPLES)
    yaml = tmp_path / "sweep.yaml"
    yaml.write_text(SWEEP.format(tasks=tasks, extra=NONE + ", limit: 1, batch_size: 64"))
    assert main([str(yaml), "--dry-run"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("lines, says", [
    (["not json"], "line 1: not valid JSON (Expecting value)"),
    ([EXAMPLES[0], "[1, 2]"], 'line 2: expected a JSON object with "prompt" and "answer", got a list'),
    ([{"prompt": "a", "answer": "b", "answr": "c"}], "line 1: unknown key 'answr' (known: prompt, answer); did you "
                                                     "mean 'answer'?"),
    ([{"prompt": "a"}], 'line 1: "answer" must be non-empty text, got nothing'),
    ([{"prompt": " ", "answer": "b"}], "line 1: \"prompt\" must be non-empty text, got str ' '"),
    ([{"prompt": "a", "answer": 7}], 'line 1: "answer" must be non-empty text, got int 7'),
    (['{"prompt": "a", "prompt": "b", "answer": "c"}'], "line 1: not valid JSON (duplicate key 'prompt': give each "
                                                       "key once)"),
    (["", "  "], ': no examples in the file (one JSON object per line: {"prompt": ..., "answer": ...})'),
])
def test_a_bad_task_line_is_named_by_file_and_line(tmp_path, capsys, lines, says):
    tasks = write_task(tmp_path / "bad.jsonl", lines)
    separator = "" if says.startswith(":") else " "
    assert refused(tmp_path, capsys, str(tasks)) == f"accuracy.tasks[0]: {tasks}{separator}{says}"


def test_a_task_file_that_is_not_utf8_is_refused(tmp_path, capsys):
    tasks = tmp_path / "latin.jsonl"
    tasks.write_bytes(b'{"prompt": "caf\xe9", "answer": "x"}\n')
    assert refused(tmp_path, capsys, str(tasks)).endswith("not UTF-8 text (invalid continuation byte at byte 15)")


@pytest.mark.parametrize("tasks, extra, says", [
    ("missing.jsonl", NONE, "accuracy.tasks[0]: no such file 'missing.jsonl'"),
    ("'{folder}'", NONE, "accuracy.tasks[0]: '{folder}' is a folder; give a task file (JSON lines)"),
    ("'{task}', '{again}'", NONE, "accuracy.tasks: two files are both named 'digits' (a task is named by its file's "
                                "stem in results); rename one"),
    ("'{task}'", ", template: llama-9", "accuracy.template: 'llama-9' is not one of chat, none, llama-2, llama-3, "
                                        "mistral, chatml"),
    ("'{task}'", ", limit: 0", "accuracy.limit: must be an integer >= 1, got 0"),
    ("'{task}'", ", batch_size: 0", "accuracy.batch_size: must be an integer >= 1, got 0"),
    ("'{task}'", ", batch_size: x", "accuracy.batch_size: expected an integer, got 'x'"),
    ("'{task}'", ", limit: .nan", "accuracy.limit: expected an integer, got nan"),
    ("'{task}'", ", sampling: {temperature: -1}", "accuracy.sampling.temperature: must be a finite number >= 0, "
                                                  "got -1"),
    ("'{task}'", ", sampling: {top_p: 0}", "accuracy.sampling.top_p: must be a finite number in (0, 1], got 0"),
    ("'{task}'", ", sampling: {temperature: .inf}", "accuracy.sampling.temperature: must be a finite number >= 0, got "
                                                      "inf"),
    ("'{task}'", ", sampling: {seed: -1}", "accuracy.sampling.seed: must be an integer in [0, 9223372036854775807], "
                                           "got -1"),
    ("'{task}'", ", lm_eval_tasks: ['']", "accuracy.lm_eval_tasks[0]: is empty; give an lm-evaluation-harness task "
                                          "name"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k], lm_eval_include: nowhere", "accuracy.lm_eval_include: no such folder "
                                                                       "'nowhere' (a folder of lm-eval task YAMLs)"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k], lm_eval_include: '{task}'", "accuracy.lm_eval_include: no such folder "
                                                                        "'{task}' (a folder of lm-eval task YAMLs)"),
    ("'{task}'", ", lm_eval_include: '{folder}'", "accuracy.lm_eval_include: names a task folder, but lm_eval_tasks "
                                                  "names no task to run"),
    ("'{task}'", ", num_fewshot: 5", "accuracy.num_fewshot: applies to lm_eval_tasks, and none is named"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k], num_fewshot: -1", "accuracy.num_fewshot: must be an integer in [0, 1000], "
                                                              "got -1"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k], num_fewshot: .nan", "accuracy.num_fewshot: expected an integer, got nan"),
    ("'{task}'", ", lm_eval_tasks: gsm8k", "accuracy.lm_eval_tasks: expected a list, got 'gsm8k'"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k], template: llama-3", "accuracy.template: 'llama-3' with lm_eval_tasks; "
                                                                "lm-eval applies the tokenizer's own chat template "
                                                                "(chat) or none"),
    ("'{task}'", ", lm_eval_tasks: [gsm8k]", "accuracy.lm_eval_tasks: lm-eval scores through a server, and no entry "
                                             "of this sweep runs one (an openai entry in a stream sweep)"),
])
def test_a_bad_section_is_one_line(tmp_path, capsys, tasks, extra, says):
    (tmp_path / "folder").mkdir()
    (tmp_path / "other").mkdir()
    task, again = write_task(tmp_path / "digits.jsonl", EXAMPLES), write_task(tmp_path / "other" / "digits.jsonl",
                                                                              EXAMPLES)
    names = dict(folder=tmp_path / "folder", task=task, again=again)
    extra = extra.replace("{task}", str(task)).replace("{folder}", str(names["folder"]))  # its other braces are YAML
    assert refused(tmp_path, capsys, tasks.format(**names), extra) == says.format(**names)


def test_an_unknown_lm_eval_task_is_named_with_the_nearest_one(tmp_path, capsys):
    """Checked against lm-eval's own task list before any engine loads, in a sweep with a server to score through."""
    (tmp_path / "mine").mkdir()
    served = SWEEP.replace("backends: [{{name: hf, device: cpu}}]\nbatch_sizes: [1]",
                           "scenario: stream\nstream: {{request_rates: [1], num_requests: 4}}\n"
                           "backends: [{{name: openai, base_url: 'http://127.0.0.1:9'}}]")
    task = write_task(tmp_path / "digits.jsonl", EXAMPLES)
    says = refused(tmp_path, capsys, str(task), f"{NONE}, lm_eval_tasks: [gsm8kk], lm_eval_include: '{tmp_path}/mine'",
                   sweep=served)
    assert says == ("accuracy.lm_eval_tasks[0]: 'gsm8kk' is not an lm-evaluation-harness task or group; did you mean "
                    "'gsm8k'? (`lm_eval ls tasks` lists them; a task of your own goes in accuracy.lm_eval_include)")


def test_lm_eval_tasks_need_lm_eval_installed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_LM_EVAL_PYTHON", str(tmp_path / "no-venv" / "bin" / "python"))
    task = write_task(tmp_path / "digits.jsonl", EXAMPLES)
    assert refused(tmp_path, capsys, str(task), NONE + ", lm_eval_tasks: [gsm8k]") == (
        f"accuracy.lm_eval_tasks: lm-evaluation-harness is not installed ({tmp_path}/no-venv/bin/python is missing: "
        "make setup builds it from requirements-eval.txt, or set BENCH_LM_EVAL_PYTHON)")


@pytest.mark.parametrize("section, says", [
    ("{tasks: 7}", "accuracy.tasks: expected a list, got 7"),
    ("{tasks: [7]}", "accuracy.tasks[0]: expected a string, got 7 (quote it: '7')"),
    ("{tasks: ['']}", "accuracy.tasks[0]: is empty; give a task file (JSON lines of prompt and answer)"),
    ("{task: [a.jsonl]}", "accuracy.task: unknown key"),
])
def test_the_tasks_key_takes_a_list_of_paths(tmp_path, capsys, section, says):
    sweep = SWEEP.replace("accuracy: {{tasks: [{tasks}]{extra}}}", "accuracy: " + section.replace("{", "{{")
                          .replace("}", "}}"))
    assert refused(tmp_path, capsys, "", sweep=sweep).startswith(says)


def test_a_stream_sweep_answers_as_a_stream_of_every_example(model):
    """In a stream sweep the tasks go through the engine's `serve`, as its points are timed, `batch_size` requests in
    flight and each answer's ids asked for. The null engine "generates" 1, 2, 3, ...: with EOS 3 an answer (1, 2) is
    right and (1, 5) wrong, whichever way it is asked."""
    from backends.synthetic import SyntheticBackend, SyntheticOptions
    from harness.measure.quality import score_tasks
    from harness.plan.points import SweepShape

    task = AccuracyTask("t", "t.jsonl", ((4, 4),) * 5, ((1, 2), (1, 5), (1, 2), (2, 1), (1, 2)), (3,))
    stream = task.stream(2)
    assert (stream.max_concurrency, stream.answer_ids, set(stream.arrivals_s)) == (2, True, {0.0})
    assert stream.requests.max_tokens == (3,) * 5 and not stream.requests.forced
    options = SyntheticOptions(name="synthetic", ttft_ms=0, tpot_ms=0)
    backend = SyntheticBackend(options, model, SweepShape(2, 8, 4, scenario="stream"))
    backend.load()
    said = {}
    for scenario in ("stream", "batch"):
        score, said[scenario] = score_tasks(backend, [task], 2, scenario)
        assert (score.task, score.examples, score.correct) == ("t", 5, 3)
    assert said["stream"]["accuracy"]["evaluated"] == (
        "greedy, through the engine instance this entry timed, as a stream, 2 examples in flight at a time; exact "
        "match, then EOS or the end of the answer's budget")
    assert said["batch"]["accuracy"]["evaluated"].startswith("greedy, through the engine instance this entry timed, "
                                                              "2 examples at a time;")
    # lm-eval's tasks go through a server; an engine in the worker has none, and the manifest says so
    assert backend.score_lm_eval(None)["lm_eval"].startswith("not run: lm-evaluation-harness scores through a server")


def speculative_results(folder, delta_interval):
    """A results folder: hf, and hf-draft3 whose task accuracy changed by -0.1 with the given interval."""
    import pandas as pd

    from harness.measure.writers import RESULT_COLUMNS

    folder.mkdir()
    low, high = delta_interval
    common = {"benchmark_name": "s", "model": "m", "dtype": "fp32", "hardware": "cpu", "num_devices": 1, "tp_size": 1,
              "scenario": "batch", "workload": "random", "batch_size": 1, "input_length": 16, "output_length": 16,
              "status": "ok", "latency_ms_mean": 40.0, "ttft_ms_mean": 5.0, "throughput_tokens_per_s": 400.0,
              "accuracy_examples": 200}
    rows = [{**common, "backend": "hf", "tpot_ms_mean": 2.5, "accuracy": 0.9, "accuracy_delta": 0.0},
            {**common, "backend": "hf-draft3", "tpot_ms_mean": 2.0, "spec_method": "draft", "spec_tokens": 3,
             "spec_baseline": "hf", "acceptance_rate": 0.5, "speedup_vs_baseline": 1.25, "accuracy": 0.8,
             "accuracy_delta": -0.1, "accuracy_delta_ci95_low": low, "accuracy_delta_ci95_high": high}]
    pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(folder / "results.csv", index=False)
    (folder / "manifest.json").write_text("{}")
    return folder


@pytest.mark.parametrize("interval, warned", [((-0.17, -0.03), True), ((-0.2, 0.01), False)])
def test_the_speculative_report_warns_where_speculation_cost_answers(tmp_path, interval, warned):
    from plots.report import make_report

    report = make_report([speculative_results(tmp_path / "run", interval)], tmp_path / "plots").read_text()
    assert f"| 0.800 (-0.100, {interval[0]:+.3f} to {interval[1]:+.3f}) |" in report
    warning = ("**Warning:** hf-draft3 answers 0.800 of the accuracy tasks, 0.100 below hf (-0.170 to -0.030): "
               "speculation changed what the model answers, which it must not.")
    assert (warning in report) == warned


def test_the_report_sets_accuracy_against_throughput_and_marks_the_frontier(tmp_path):
    """hf-int8 is faster than hf beyond both intervals and as accurate: hf is off the frontier. hf-int4 is faster
    still but less accurate: on it. hf-noisy is slower than hf-int8 by less than their intervals: on it too."""
    import pandas as pd

    from harness.measure.writers import RESULT_COLUMNS
    from plots.report import make_report

    folder = tmp_path / "run"
    folder.mkdir()
    common = {"benchmark_name": "q", "model": "m", "dtype": "fp32", "hardware": "cpu", "num_devices": 1, "tp_size": 1,
              "scenario": "batch", "workload": "random", "input_length": 16, "output_length": 16, "status": "ok",
              "latency_ms_mean": 40.0, "ttft_ms_mean": 5.0, "tpot_ms_mean": 2.0, "accuracy_examples": 200}
    entries = {"hf": (400, 390, 410, 0.9, 0.85, 0.94), "hf-int8": (600, 590, 610, 0.9, 0.85, 0.94),
               "hf-int4": (900, 880, 920, 0.5, 0.43, 0.57), "hf-noisy": (585, 560, 595, 0.9, 0.85, 0.94)}
    rows = [{**common, "backend": name, "batch_size": bs, "throughput_tokens_per_s": speed / bs ** 0.5,
             "throughput_tokens_per_s_ci95_low": low / bs ** 0.5, "throughput_tokens_per_s_ci95_high": high / bs ** 0.5,
             "accuracy": acc, "accuracy_ci95_low": acc_low, "accuracy_ci95_high": acc_high}
            for name, (speed, low, high, acc, acc_low, acc_high) in entries.items() for bs in (4, 1)]
    pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(folder / "results.csv", index=False)
    (folder / "manifest.json").write_text("{}")
    report = make_report([folder], tmp_path / "plots").read_text()
    assert "## Accuracy against throughput" in report
    assert "| hf | 16 | 16 | 400 | bs 1 | 0.900 (0.850-0.940) | 200 | - | no |" in report
    assert "| hf-int8 | 16 | 16 | 600 | bs 1 | 0.900 (0.850-0.940) | 200 | - | yes |" in report
    assert "| hf-int4 | 16 | 16 | 900 | bs 1 | 0.500 (0.430-0.570) | 200 | - | yes |" in report
    assert "| hf-noisy | 16 | 16 | 585 | bs 1 | 0.900 (0.850-0.940) | 200 | - | yes |" in report
    assert (tmp_path / "plots" / "accuracy_batch.png").stat().st_size > 10_000
    page = (tmp_path / "plots" / "report.html").read_text()  # report.html's section holds the same rows
    section = page[page.index('<section id="accuracy">'):]
    section = section[:section.index("</section>")]
    assert section.count("<tr data-ids=") == 4 and ">hf-int4<" in section and ">0.500<" in section


def test_a_report_without_accuracy_has_no_such_section(tmp_path):
    from plots.report import make_report

    report = make_report([speculative_results(tmp_path / "run", (-0.2, 0.01))], tmp_path / "plots").read_text()
    assert "## Accuracy against throughput" in report  # its rows have accuracy
    import pandas as pd

    table = pd.read_csv(tmp_path / "run" / "results.csv")
    table["accuracy"] = float("nan")
    table.to_csv(tmp_path / "run" / "results.csv", index=False)
    report = make_report([tmp_path / "run"], tmp_path / "plots2").read_text()
    assert "## Accuracy against throughput" not in report and not (tmp_path / "plots2" / "accuracy_batch.png").exists()


def test_accuracy_csv_holds_each_entry_and_task_as_the_manifest_says(tmp_path):
    """accuracy.csv is rewritten from the manifest each time it is: an entry that failed to score has no row, and
    one that answered again on resume has its latest scores only."""
    import csv

    from harness.measure.quality import task_summary
    from harness.measure.writers import ResultsDir

    out = ResultsDir(tmp_path)
    out.open(resume=False)

    def manifest(correct: int) -> dict:
        tasks = [task_summary(TaskScore("reverse", 50, correct)), task_summary(TaskScore("sort", 40, 40))]
        return {"config": {}, "backends": [
            {"label": "hf", "runtime": {"accuracy": {"evaluated": "greedy, through ...", "tasks": tasks}}},
            {"label": "vllm", "runtime": {"accuracy": "failed: RuntimeError: engine died"}},
            {"label": "plain", "runtime": {}}]}

    out.write_manifest({"config": {}, "backends": []})
    assert not (tmp_path / "accuracy.csv").exists()
    out.write_manifest(manifest(10))
    out.write_manifest(manifest(20))
    rows = list(csv.DictReader(open(tmp_path / "accuracy.csv")))
    assert [(r["backend"], r["task"], r["examples"], r["correct"], r["value"]) for r in rows] == [
        ("hf", "reverse", "50", "20", "0.4"), ("hf", "sort", "40", "40", "1")]
    low, high = wilson(20, 50)
    assert (float(rows[0]["ci95_low"]), float(rows[0]["ci95_high"])) == pytest.approx((low, high), rel=1e-5)
    assert rows[0]["metric"] == "exact_match" and rows[0]["evaluated"] == "greedy, through ..."

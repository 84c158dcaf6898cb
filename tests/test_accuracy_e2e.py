"""Accuracy at the timed configuration, end to end (issue 51): a digits model trained here in seconds (the draft's
shape: real skill, far from perfect), swept on hf and vLLM in process, unquantized and int8, with `accuracy.tasks` on
its held-out split, and hf speculating with the model as its own draft; then streamed to HF continuous batching and
vLLM's OpenAI-compatible server, which answer the tasks as streams. The harness's accuracy is held against the
training script's own scoring (hf `generate` called directly, prompts grouped by length: another code path), vLLM's
and the streamed entries' against hf's, each int8 entry's price against its own engine's unquantized entry, and each
speculative entry's against the entry without speculation."""

import json
import sys

import pytest

from harness.measure.stats import difference, wilson
from tests.conftest import REPO, run_benchmark
from tests.contract import rows

sys.path.insert(0, str(REPO / "scripts"))
import train_digits_model as digits  # noqa: E402

LIMIT = 100  # held-out examples answered by each entry
VLLM = "{name: vllm, device: cpu, enforce_eager: true, kv_cache_memory_bytes: 268435456, multiprocessing: false}"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The draft's shape, trained (about 8 s), saved as a model folder, and scored by the script itself."""
    folder = tmp_path_factory.mktemp("digits") / "model"
    examples = digits.test_split()
    model = digits.train(digits.DRAFT, {prompt for prompt, _ in examples}, log=lambda line: None)
    folder.mkdir()
    digits.save(model, folder, examples)
    share, _ = digits.accuracy(model, examples[:LIMIT])
    return folder, round(share * LIMIT)


@pytest.fixture(scope="module")
def sweep(trained, tmp_path_factory):
    folder, _ = trained
    tmp = tmp_path_factory.mktemp("accuracy")
    yaml = tmp / "sweep.yaml"
    yaml.write_text(f"""
benchmark_name: accuracy-e2e
model: {{name_or_path: '{folder}', weights: pretrained, dtype: fp32, quantization: [none, int8]}}
backends:
  - name: hf
    device: cpu
    speculative: [null, {{method: draft, num_speculative_tokens: 2, draft: {{name_or_path: '{folder}'}}}}]
  - {VLLM}
batch_sizes: [1]
input_lengths: [8]
output_lengths: [4]
num_batches: 1
num_warmup_batches: 1
accuracy: {{tasks: ['{folder}/task/test.jsonl'], limit: {LIMIT}, batch_size: 50}}
""")
    proc = run_benchmark(yaml, "--output-dir", tmp / "out", "--no-plots")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["backend"]: r for r in rows(tmp / "out" / "results.csv")}, tmp / "out"


# The model served by vLLM's OpenAI-compatible server, its model in the engine core's process (7 s sooner a start).
SERVER = ("env VLLM_ENABLE_V1_MULTIPROCESSING=0 {python} -m vllm.entrypoints.openai.api_server --model {model_dir} "
          "--dtype float32 --enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 --port {port} "
          "--disable-uvicorn-access-log")


@pytest.fixture(scope="module")
def served(trained, tmp_path_factory):
    """A stream sweep of the same model on vLLM behind its server, which answers the tasks as a stream through the
    server it timed, and lm-eval's task through it too. (An engine in the worker's own process answers a stream
    sweep's tasks through the same `serve`: tests/test_accuracy.py runs the null engine that way.)"""
    folder, _ = trained
    tmp = tmp_path_factory.mktemp("accuracy-served")
    (tmp / "lm_eval_tasks").mkdir()  # the same held-out split as a task of lm-eval's, over the local file
    (tmp / "lm_eval_tasks" / "digits.yaml").write_text(LM_EVAL_TASK.format(data=folder / "task" / "test.jsonl"))
    yaml = tmp / "sweep.yaml"
    yaml.write_text(f"""
benchmark_name: accuracy-served-e2e
scenario: stream
model: {{name_or_path: '{folder}', weights: pretrained, dtype: fp32}}
backends:
  - {{name: openai, label: vllm-serve, command: '{SERVER}'}}
input_lengths: [8]
output_lengths: [4]
stream: {{request_rates: [8], num_requests: 8}}
accuracy: {{tasks: ['{folder}/task/test.jsonl'], limit: {LIMIT}, batch_size: 50, lm_eval_tasks: [digits_lm_eval],
           lm_eval_include: '{tmp / "lm_eval_tasks"}'}}
""")
    proc = run_benchmark(yaml, "--output-dir", tmp / "out", "--no-plots")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {r["backend"]: r for r in rows(tmp / "out" / "results.csv")}, tmp / "out"


# An lm-evaluation-harness task of one's own: the task file as lm-eval's JSON dataset, the answer compared as text.
LM_EVAL_TASK = """task: digits_lm_eval
dataset_path: json
dataset_kwargs:
  data_files:
    test: '{data}'
test_split: test
output_type: generate_until
doc_to_text: '{{{{prompt}}}}'
doc_to_target: '{{{{answer}}}}'
generation_kwargs:
  max_gen_toks: 16
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


@pytest.mark.engine
def test_lm_eval_scores_the_same_task_through_the_server_and_agrees(served):
    """lm-eval's own local-completions model and exact match, through the server the entry timed: its score of the
    same 100 examples lies in the harness's interval, its results JSON is in the manifest, accuracy.csv has its row."""
    results, out = served
    runtime = {b["label"]: b["runtime"] for b in json.loads((out / "manifest.json").read_text())["backends"]}
    said = runtime["vllm-serve"]["lm_eval"]
    assert isinstance(said, dict), said
    assert said["evaluated"].startswith("lm-evaluation-harness 0.4.13 (its local-completions model) through the "
                                        f"server this entry timed ({runtime['vllm-serve']['base_url']}/v1/completions)")
    (row,) = said["tasks"]
    assert (row["task"], row["metric"], row["examples"]) == ("digits_lm_eval", "exact_match,none", LIMIT)
    ours = results["vllm-serve"]
    assert float(ours["accuracy_ci95_low"]) <= row["value"] <= float(ours["accuracy_ci95_high"])
    assert said["results"]["results"]["digits_lm_eval"]["exact_match,none"] == row["value"]
    scores = [r for r in rows(out / "accuracy.csv") if r["task"] == "digits_lm_eval"]
    assert [(r["backend"], float(r["value"])) for r in scores] == [("vllm-serve", row["value"])]


@pytest.mark.engine
def test_the_harness_scores_what_the_model_answers(trained, sweep):
    _, correct = trained
    results, _ = sweep
    assert set(results) == {"hf", "hf-int8", "hf-draft2", "hf-draft2-int8", "vllm", "vllm-int8"}
    hf = results["hf"]
    assert hf["status"] == "ok" and int(hf["accuracy_examples"]) == LIMIT
    # A model with skill, not all of it: the check below could not pass by scoring everything right or wrong.
    assert 0 < correct < LIMIT
    assert float(hf["accuracy"]) == correct / LIMIT
    assert (float(hf["accuracy_ci95_low"]), float(hf["accuracy_ci95_high"])) == pytest.approx(wilson(correct, LIMIT))


@pytest.mark.engine
def test_vllm_in_process_agrees_with_hf(sweep):
    results, _ = sweep
    hf, vllm = results["hf"], results["vllm"]
    # Both engines greedy on fp32 weights: the same answers but for near-ties in the logits.
    assert float(hf["accuracy_ci95_low"]) <= float(vllm["accuracy"]) <= float(hf["accuracy_ci95_high"])


@pytest.mark.engine
def test_a_stream_sweep_scores_through_the_server_it_timed_and_agrees_with_hf(sweep, served):
    """hf's static batches and vLLM's server answer the same 100 examples alike; the served entry through the very
    server its points were timed on (the manifest names its URL), asked for its answers' token ids."""
    hf = sweep[0]["hf"]
    results, out = served
    row = results["vllm-serve"]
    assert row["status"] == "ok" and int(row["accuracy_examples"]) == LIMIT
    assert float(hf["accuracy_ci95_low"]) <= float(row["accuracy"]) <= float(hf["accuracy_ci95_high"])
    runtime = json.loads((out / "manifest.json").read_text())["backends"][0]["runtime"]
    assert runtime["accuracy"]["evaluated"] == (
        f"greedy, through the server this entry timed ({runtime['base_url']}/v1/completions), as a stream, 50 "
        "examples in flight at a time; exact match, then EOS or the end of the answer's budget")
    (score,) = [r for r in rows(out / "accuracy.csv") if r["task"] == "test"]  # the file of its own
    (task,) = runtime["accuracy"]["tasks"]
    assert (score["backend"], int(score["correct"]), score["evaluated"]) == (
        "vllm-serve", task["correct"], runtime["accuracy"]["evaluated"])
    assert float(score["value"]) == float(row["accuracy"])


@pytest.mark.engine
def test_each_int8_entry_is_priced_against_its_own_engine(sweep):
    results, _ = sweep
    for engine in ("hf", "vllm"):
        plain, int8 = results[engine], results[f"{engine}-int8"]
        assert (float(plain["accuracy_delta"]), plain["quality_reference"]) == (0.0, "")
        assert int8["quality_reference"] == engine
        n = LIMIT
        expected = difference(round(float(int8["accuracy"]) * n), n, round(float(plain["accuracy"]) * n), n)
        got = tuple(float(int8[k]) for k in ("accuracy_delta", "accuracy_delta_ci95_low", "accuracy_delta_ci95_high"))
        assert got == pytest.approx(expected, rel=1e-5)  # results.csv keeps 6 significant digits


@pytest.mark.engine
def test_the_manifest_says_how_each_entry_was_evaluated(sweep):
    _, out = sweep
    for entry in json.loads((out / "manifest.json").read_text())["backends"]:
        accuracy = entry["runtime"]["accuracy"]
        assert accuracy["evaluated"].startswith("greedy, through the engine instance this entry timed")
        (task,) = accuracy["tasks"]
        assert (task["task"], task["metric"], task["examples"]) == ("test", "exact_match", LIMIT)


@pytest.mark.engine
def test_entries_fork_from_preloading_processes_that_import_each_module_once(sweep):
    """harness/run/preload.py on this sweep: the hf entries share one preloading process, which imports torch and
    transformers for the first only, and what its job's pickle names; vLLM's entries (another environment:
    VLLM_ENABLE_V1_MULTIPROCESSING) get their own, which imports vLLM for the first only."""
    _, out = sweep
    runtime = {b["label"]: b["runtime"] for b in json.loads((out / "manifest.json").read_text())["backends"]}
    # then the packages unpickling the job imports (harness/run/preload.py, pickled_modules)
    hf_imports = "harness.run.worker, backends.generate.hf, torch, transformers, transformers.modeling_utils, numpy"
    vllm_imports = "harness.run.worker, backends.vllm_engine.engine, torch, vllm, transformers.modeling_utils, numpy"
    assert {label: r["worker_start"] for label, r in runtime.items()} == {
        "hf": f"forked from a preloading process that imported {hf_imports} for it",
        "hf-int8": "forked from a preloading process", "hf-draft2": "forked from a preloading process",
        "hf-draft2-int8": "forked from a preloading process",
        "vllm": f"forked from a preloading process that imported {vllm_imports} for it",
        "vllm-int8": "forked from a preloading process"}
    for label in ("hf", "vllm"):  # a new interpreter takes seconds to get this far; a fork, a hundredth of that
        first, later = runtime[label]["time_budget_s"], runtime[f"{label}-int8"]["time_budget_s"]
        # (engine_import_s is not held: it also counts building the model's config in each worker, 0.7 s here and
        # 1.6 s with another file's sweep beside it, preloaded or not)
        assert first["worker_start_s"] > 1 and later["worker_start_s"] < 0.5, (first, later)


@pytest.mark.engine
def test_the_report_puts_each_price_beside_its_speed(sweep, tmp_path):
    from plots.report import make_report

    results, out = sweep
    report = make_report([out], tmp_path / "plots").read_text()
    assert "task accuracy (change, its 95% interval)" in report
    int8 = results["hf-int8"]
    delta, low, high = (float(int8[k]) for k in ("accuracy_delta", "accuracy_delta_ci95_low",
                                                 "accuracy_delta_ci95_high"))
    assert f"| {float(int8['accuracy']):.3f} ({delta:+.3f}, {low:+.3f} to {high:+.3f}) |" in report
    spec = results["hf-draft2"]  # the speculative section's last column: no change, its interval around 0
    assert (f"| {float(spec['accuracy']):.3f} (+0.000, {float(spec['accuracy_delta_ci95_low']):+.3f} to "
            f"{float(spec['accuracy_delta_ci95_high']):+.3f}) |") in report
    assert "speculation changed what the model answers" not in report


@pytest.mark.engine
def test_a_speculative_entry_is_priced_against_the_same_entry_without_it(sweep):
    """The model drafting for itself under greedy decoding: every draft accepted, every answer the same, so a delta
    of exactly 0 against its spec_baseline (its interval around it), one answer at a time as assisted generation
    runs."""
    results, out = sweep
    for plain, spec in (("hf", "hf-draft2"), ("hf-int8", "hf-draft2-int8")):
        row = results[spec]
        assert row["spec_baseline"] == plain and float(row["acceptance_rate"]) == 1.0
        assert row["accuracy"] == results[plain]["accuracy"] and float(row["accuracy_delta"]) == 0.0
        assert float(row["accuracy_delta_ci95_low"]) < 0 < float(row["accuracy_delta_ci95_high"])
    runtime = {b["label"]: b["runtime"] for b in json.loads((out / "manifest.json").read_text())["backends"]}
    assert "1 example at a time" in runtime["hf-draft2"]["accuracy"]["evaluated"]

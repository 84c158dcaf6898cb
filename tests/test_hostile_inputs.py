"""The inputs a hostile first user tried (issue 48's list, on every kind of key and file the harness reads), each one
`error:` line naming the key or the file and what is allowed, exit code 2: the kinds of a YAML's keys (a mapping for
a list, a list for a section, a non-bool for a bool, NaN, infinity), absurd schedules, model config.json files, paths
that cannot be written, labels, grid keys and --resume after a changed engine option."""

import json
import shutil

import pytest

from app.cli import main
from app.resume import check_resumable
from backends.registry import BACKENDS
from harness.config.sweep import load_config, to_plain
from harness.errors import UserError
from harness.measure.writers import MAX_NAME_CHARS, safe_file_name
from tests.conftest import REPO
from workloads.registry import WORKLOADS

SYN = ("benchmark_name: hostile\nmodel: {preset: tiny-llama, dtype: fp32}\nbackends: [{name: synthetic}]\n"
       "batch_sizes: [1, 2]\ninput_lengths: [16]\noutput_lengths: [4]\nnum_batches: 2\nnum_warmup_batches: 0\n")
STREAM = ["scenario=stream", "batch_sizes=null"]
TINY = REPO / "harness" / "presets" / "tiny-llama"


@pytest.fixture
def syn(tmp_path):
    path = tmp_path / "syn.yaml"
    path.write_text(SYN)
    return path


CASES = {
    "a list key given a mapping": (["backends={name: synthetic}"],
                                   "backends: expected a list, got a mapping {'name': 'synthetic'}"),
    "lengths given a mapping": (["input_lengths={a: 16}"], "input_lengths: expected a list, got a mapping {'a': 16}"),
    "stages given a mapping": ([*STREAM, "stream.arrival=stages", "stream.stages={rate: 10, duration_s: 1}"],
                               "stream.stages: expected a list, got a mapping {'rate': 10, 'duration_s': 1}"),
    "a section given a list": ([*STREAM, "stream.arrival=ramp", "stream.ramp=[1, 2]"],
                               "stream.ramp: expected a mapping of keys, got a list [1, 2]"),
    "an extra key in a stage": ([*STREAM, "stream.arrival=stages", "stream.stages=[{rate: 1, duration_s: 1, ramp: 3}]"],
                                "stream.stages[0].ramp: unknown key (allowed: rate, duration_s)"),
    "a bool given 2": ([*STREAM, "stream.stop_at_saturation=2"], "stream.stop_at_saturation: expected true or false, "
                                                                 "got 2"),
    "a bool given 7": (["keep_prefix_cache=7"], "keep_prefix_cache: expected true or false, got 7"),
    "a bool given a word": (["preload_workers=maybe"], "preload_workers: expected true or false, got 'maybe'"),
    "a NaN rate": ([*STREAM, "stream.request_rates=[.nan]"],
                   "stream.request_rates[0]: must be a finite number, got nan"),
    "an infinite shape": ([*STREAM, "stream.arrival=gamma", "stream.burstiness=.inf"],
                          "stream.burstiness: must be a finite number > 0, got inf"),
    "an infinite stage": ([*STREAM, "stream.arrival=stages", "stream.stages=[{rate: 1, duration_s: .inf}]"],
                          "stream.stages[0].duration_s: must be a finite number of seconds > 0, got inf"),
    "an absurd schedule": ([*STREAM, "stream.arrival=stages", "stream.stages=[{rate: 1.0e9, duration_s: 10}]"],
                           "stream.stages: the schedule sends about 10,000,000,010 requests a point (warm-up "
                           "included), "
                           "more than the 1,000,000 a point may; send fewer"),
    "a schedule longer than a point may run": (
        [*STREAM, "stream.request_rates=[1]", "stream.num_requests=5000"],
        "stream: at 1 requests/s the schedule's arrivals alone take about 5,008 s a point, longer than point_timeout_s "
        "(1800 s) lets a point run; send fewer requests (num_requests, duration_s, stages), raise the rate, or raise "
        "point_timeout_s"),
    "a grid key with a trailing dot": (["backends=[{name: synthetic, grid: {'ttft_ms.': [1, 2]}}]"],
                                       "backends[0].grid.ttft_ms.: a key with an empty part; name an option, or a key "
                                       "inside a mapping option as engine_args.block_size"),
    "an integer past 64 bits": (["seed=100000000000000000000"],
                                "seed: must be an integer of at most 19 digits, got 1e+20"),
    "a label with a tab": (['backends=[{name: synthetic, label: "a\\tb"}]'],
                           "backends[0].label: must be printable text, not empty, got 'a\\tb'"),
}


@pytest.mark.parametrize("overrides,message", CASES.values(), ids=CASES.keys())
def test_each_is_one_line_naming_the_key(syn, overrides, message, capsys):
    assert main([str(syn), *overrides, "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_a_trace_whose_gap_outlasts_a_point_is_refused_at_load(syn, tmp_path, capsys):
    trace = tmp_path / "gap.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": 4}) + "\n"
                             for t in (0, 1000, 1e308)))
    assert main([str(syn), *STREAM, "input_lengths=null", "output_lengths=null", "stream.arrival=trace",
                 f"stream.trace={trace}", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"error: stream.trace: {trace}: the replay lasts 1e+305 s (its longest gap: 1e+305 s before line 3), longer "
        "than point_timeout_s (1800 s) lets a point run; narrow stream.window, lower stream.time_scale, or raise "
        "point_timeout_s\n")


def model_folder(tmp_path, edit=None, text=None):
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    if text is not None:
        (folder / "config.json").write_text(text)
    elif edit is not None:
        fields = json.loads((folder / "config.json").read_text())
        edit(fields)
        (folder / "config.json").write_text(json.dumps(fields))
    return folder


CONFIGS = {
    "missing hidden_size": (lambda c: c.pop("hidden_size"), None,
                            "no hidden_size (model_type llama is sized by it; planning will not guess it)"),
    "misspelt hidden_size": (lambda c: c.update(hiden_size=c.pop("hidden_size")), None,
                             "no hidden_size (model_type llama is sized by it; planning will not guess it); did you "
                             "mean 'hiden_size'?"),
    "a size that is text": (lambda c: c.update(hidden_size="big"), None,
                            "hidden_size: must be a whole number in [1, 1048576], got 'big'"),
    "no heads": (lambda c: c.update(num_attention_heads=0), None, "num_attention_heads: must be a whole number in [1, 16384], "
                                                                   "got 0"),
    "negative layers": (lambda c: c.update(num_hidden_layers=-3), None,
                        "num_hidden_layers: must be a whole number in [1, 1024], got -3"),
    "a JSON list": (None, "[1, 2]", "expected a JSON object of config fields, got a list"),
    "not JSON": (None, '{"model_type": ', "not valid JSON (Expecting value: line 1 column 16 (char 15))"),
    "no model_type": (lambda c: c.pop("model_type"), None,
                      "no model_type (e.g. \"llama\"): transformers picks the model's class by it"),
}


@pytest.mark.parametrize("edit,text,message", CONFIGS.values(), ids=CONFIGS.keys())
def test_a_config_json_is_checked_as_it_is_read(syn, tmp_path, edit, text, message, capsys):
    folder = model_folder(tmp_path, edit, text)
    assert main([str(syn), "model.preset=null", f"model.name_or_path={folder}", "--plan"]) == 2
    assert capsys.readouterr().err == f"error: {folder / 'config.json'}: {message}\n"


def test_a_model_folder_without_a_config_json(syn, tmp_path, capsys):
    assert main([str(syn), "model.preset=null", f"model.name_or_path={tmp_path}", "--plan"]) == 2
    assert capsys.readouterr().err == (f"error: model.name_or_path: {tmp_path} has no config.json (a model folder "
                                       "holds the one save_pretrained writes)\n")


def test_overrides_are_held_to_the_same_sizes(syn, capsys):
    assert main([str(syn), "model.overrides.num_hidden_layers=-3", "--plan"]) == 2
    assert capsys.readouterr().err == "error: model.overrides.num_hidden_layers: must be a whole number in [1, 1024], got -3\n"


def test_folders_that_cannot_be_written_are_said_before_any_work(syn, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main([str(syn), "--output-dir", str(a_file)]) == 2
    assert capsys.readouterr().err == f"error: --output-dir: {a_file} is a file, not a folder\n"
    assert main([str(syn), "--output-dir", "/proc/no-such/out"]) == 2
    assert capsys.readouterr().err == ("error: --output-dir: cannot create the folder /proc/no-such/out (No such file "
                                       "or directory)\n")
    assert main([str(syn), "--plan", "--charts", str(a_file / "charts")]) == 2
    charts = a_file / "charts"
    assert capsys.readouterr().err == f"error: --charts: cannot create the folder {charts} (Not a directory)\n"


def test_a_label_becomes_a_safe_file_name_that_names_it_alone():
    assert safe_file_name("hf") == "hf" and safe_file_name("vllm-tp2") == "vllm-tp2"
    names = [safe_file_name(label) for label in ("../../x", "a/b", "a-b", "..", "x" * 300, "x" * 301, "vllm[tp=2]")]
    assert len(set(names)) == len(names)
    assert all("/" not in n and not n.startswith(".") and 0 < len(n) <= MAX_NAME_CHARS for n in names), names


def test_resume_refuses_a_changed_engine_option_and_takes_a_new_timeout(syn, tmp_path):
    def loaded(*overrides):
        return load_config(syn, list(overrides), BACKENDS, WORKLOADS)

    previous = {"config": to_plain(loaded())}
    with pytest.raises(UserError, match=r"^--resume: .* was measured with backends\[0\]\.ttft_ms=1\.0, this config "
                                        r"has 50\.0; use a new --output-dir$"):
        check_resumable(previous, loaded("backends=[{name: synthetic, ttft_ms: 50}]"), tmp_path)
    with pytest.raises(UserError, match=r"was measured with sampling\.temperature=0\.0, this config has 0\.5"):
        check_resumable(previous, loaded("sampling.temperature=0.5"), tmp_path)
    # the axes grow, an entry is added, a timeout changes: the points measured stay what they were
    check_resumable(previous, loaded("batch_sizes=[1,2,4]", "point_timeout_s=60",
                                     "backends=[{name: synthetic}, {name: synthetic, label: slow, ttft_ms: 9}]"),
                    tmp_path)


def documented_errors():
    """Each `$ python benchmark.py yamls/...` command of the troubleshooting page that answers with one `error:` line
    and runs nothing (--dry-run, --plan, or a folder it refuses), with that line as the page prints it; a hub id is
    left out (it would ask the network)."""
    import shlex

    lines = (REPO / "docs" / "guides" / "troubleshooting.md").read_text().splitlines()
    found = [(shlex.split(line[2:])[2:], answer) for line, answer in zip(lines, lines[1:])
             if line.startswith("$ python benchmark.py yamls/") and answer.startswith("error: ")]
    return [(args, answer) for args, answer in found if "huggingface" not in answer
            and ("--dry-run" in args or "--plan" in args or args[-2:] == ["--output-dir", "README.md"])]


@pytest.mark.parametrize("args,line", documented_errors())
def test_the_troubleshooting_page_prints_what_the_tool_prints(args, line, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(args) == 2
    assert capsys.readouterr().err == line + "\n"

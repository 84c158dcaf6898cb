"""MosaicML platform launches: templates, run configs, submit, collect, and the log-marker protocol.

Offline throughout: the mcli SDK is real, its network calls are monkeypatched, and any socket
connection fails the test. tests/fixtures/mcli/tiny-cpu.log is a run log in the marker format
(a real CPU sweep's files, printed the way `--emit-log-markers` does, with setup noise around
them); tests/fixtures/mcli/tiny-cpu/ holds the files it must rebuild, byte for byte.
"""

import csv
import io
import json
import os
import socket
import sys
import warnings
from http import HTTPStatus
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from mcli.api.exceptions import MAPIException
from mcli.utils.utils_string_functions import MAX_RUN_NAME_LENGTH, validate_rfc1123_name

import mcli
from backends.registry import BACKENDS
from harness.config.sweep import load_config, to_plain
from harness.errors import UserError
from harness.measure import logmarkers
from mosaic import runs as platform
from workloads.registry import WORKLOADS

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = sorted((REPO / "mcli").glob("*.yaml"))
FIXTURES = REPO / "tests" / "fixtures" / "mcli"
EXPECTED = FIXTURES / "tiny-cpu"
FILES = ("results.csv", "samples.csv", "manifest.json")
RUN = "bench-tiny-cpu-h100-x8-a1b2c3"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an offline test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def no_key(monkeypatch, tmp_path):
    """No API key anywhere the SDK looks: env var, access-token file, ~/.mosaic/mcli_config."""
    for name in ("MOSAICML_API_KEY", "MOSAICML_ACCESS_TOKEN_FILE", "MCLI_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(mcli.config, "MCLI_CONFIG_PATH", tmp_path / "absent-mcli-config")


@pytest.fixture
def api_key(no_key, monkeypatch):
    monkeypatch.setenv("MOSAICML_API_KEY", "test-key-not-real")


@pytest.fixture(scope="module")
def sweep_70b() -> dict:
    return to_plain(load_config(REPO / "yamls" / "70b.yaml", [], BACKENDS, WORKLOADS))


def read_exact(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def with_repo(run_configs, repo="acme/llm-inference-benchmark"):
    """The shipped templates name a placeholder repo, which submit refuses; a user sets their fork."""
    for run_config in run_configs:
        for item in run_config.integrations:
            item["git_repo"] = repo
    return run_configs


def write_template(tmp_path: Path, name: str = "h100-x8.yaml", **changes) -> Path:
    raw = yaml.safe_load((REPO / "mcli" / "h100-x8.yaml").read_text())
    raw.update(changes)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ---- templates ----

def test_the_three_hardware_templates_ship():
    assert {"a100-80gb-x8.yaml", "h100-x8.yaml", "a100-80gb-x2.yaml"} <= {p.name for p in TEMPLATES}


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_template_loads_and_finalizes_offline_with_no_key(path, no_key):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the SDK only warns about unknown or deprecated fields: none allowed
        run_config = mcli.RunConfig.from_file(path)
        final = mcli.FinalRunConfig.finalize_config(run_config)
        run_input = final.to_create_run_api_input()["runInput"]
    assert platform.RUN_COMMAND in run_input["command"]
    assert run_input["compute"]["gpus"] >= 1 and run_input["compute"]["gpuType"]
    assert [i["type"] for i in run_input["integrations"]] == ["git_repo"]
    platform.load_template(path)  # our stricter check passes too


@pytest.mark.parametrize("name, gpus, gpu_type", [
    ("a100-80gb-x8.yaml", 8, "a100_80gb"), ("h100-x8.yaml", 8, "h100_80gb"), ("a100-80gb-x2.yaml", 2, "a100_80gb"),
])
def test_template_asks_for_its_hardware(name, gpus, gpu_type):
    compute = platform.load_template(REPO / "mcli" / name)["compute"]
    assert (compute["gpus"], compute["gpu_type"]) == (gpus, gpu_type)


@pytest.mark.parametrize("changes, expected", [
    ({"imgae": "x"}, "imgae: not a template field; did you mean 'image'?"),
    ({"compute": {"gpus": 8, "gpu_typ": "h100_80gb"}},
     "compute.gpu_typ: not a template field; did you mean 'gpu_type'?"),
    ({"scheduling": {"max_duraton": 2}}, "scheduling.max_duraton: not a template field; did you mean 'max_duration'?"),
    ({"integrations": [{"integration_type": "git_repo", "git_repo": "a/b", "git_brnach": "main"}]},
     "integrations[0].git_brnach: not a template field; did you mean 'git_branch'?"),
    ({"parameters": {"batch_sizes": [1]}}, "parameters: not a template field; benchmark.py fills it"),
    ({"gpu_type": "h100_80gb"}, "gpu_type: not a template field; use compute.gpu_type"),
])
def test_unknown_template_field_is_one_line_naming_file_field_and_allowed(tmp_path, changes, expected):
    path = write_template(tmp_path, **changes)
    with pytest.raises(UserError) as e:
        platform.build_run_configs({"benchmark_name": "x"}, [path])
    message = str(e.value)
    assert message.startswith(f"{path}: ") and expected in message and "(allowed: " in message
    assert "\n" not in message


def test_sdk_alone_only_warns_about_a_typo(tmp_path):
    path = write_template(tmp_path, imgae="x")
    with pytest.warns(UserWarning, match="imgae"):
        mcli.RunConfig.from_file(path)


@pytest.mark.parametrize("changes, expected", [
    ({"command": "python benchmark.py yamls/7b.yaml"}, "command: must run `python benchmark.py /mnt/config/"),
    ({"env_variables": {"PYTHONUNBUFFERED": 1}}, "env_variables.PYTHONUNBUFFERED: must be a string"),
    ({"image": None}, "image: required"),
])
def test_template_values_are_checked(tmp_path, changes, expected):
    with pytest.raises(UserError, match=expected.replace(".", r"\.").replace("(", r"\(")):
        platform.load_template(write_template(tmp_path, **changes))


def test_two_templates_with_one_hardware_tag_are_refused(tmp_path):
    (tmp_path / "b").mkdir()
    first, second = write_template(tmp_path), write_template(tmp_path / "b")
    with pytest.raises(UserError, match="both give hardware tag 'h100-x8'"):
        platform.build_run_configs({"benchmark_name": "x"}, [first, second])


# ---- run configs ----

def test_70b_with_two_templates_gives_two_valid_runs_carrying_the_sweep(sweep_70b, tmp_path, no_key):
    templates = [REPO / "mcli" / "h100-x8.yaml", REPO / "mcli" / "a100-80gb-x8.yaml"]
    runs = platform.build_run_configs(sweep_70b, templates)
    assert [r.name for r in runs] == ["bench-llama-2-70b-h100-x8", "bench-llama-2-70b-a100-80gb-x8"]
    for run, tag, gpu in zip(runs, ("h100-x8", "a100-80gb-x8"), ("h100-sxm", "a100-sxm-80gb")):
        text = platform.render_run_yaml(run)
        data = yaml.safe_load(text)
        assert mcli.RunConfig.from_dict(data) == run  # the dry run prints exactly what would be submitted
        mcli.FinalRunConfig.finalize_config(mcli.RunConfig.from_dict(data)).to_create_run_api_input()
        sweep = tmp_path / f"{tag}.yaml"
        sweep.write_text(yaml.safe_dump(data["parameters"]))
        # The template's machine (its GPU and count, harness/peaks.yaml's name) is the run's `hardware`.
        hardware = {**sweep_70b["hardware"], "gpu": gpu, "num_gpus": 8}
        assert to_plain(load_config(sweep, [], BACKENDS, WORKLOADS)) == {
            **sweep_70b, "benchmark_name": f"llama-2-70b-{tag}", "hardware": hardware}
    assert sweep_70b["benchmark_name"] == "llama-2-70b"  # the caller's dict is not modified


def test_a_template_price_fills_the_cost_unless_the_sweep_sets_one():
    raw = {"compute": {"gpus": 2, "gpu_type": "a100_80gb"}, "metadata": {"cost_per_hour": 1.5}}
    assert platform.template_hardware(raw, {}) == {"gpu": "a100-sxm-80gb", "num_gpus": 2, "cost_per_hour": 1.5}
    mine = {"gpu": "h100-pcie", "cost_per_hour": 3.0}
    assert platform.template_hardware(raw, mine) == mine  # the sweep's own settings win
    assert platform.template_hardware({"compute": {"gpus": 1, "gpu_type": "tpu_v9"}}, {}) == {}


def test_run_names_follow_the_platform_rules():
    assert platform.run_name("Bench", "Llama_2.70B", "h100-x8") == "bench-llama-2-70b-h100-x8"
    long_name = platform.run_name("bench", "a-very-long-benchmark-name-" * 4, "a100-80gb-x8")
    assert len(long_name) <= MAX_RUN_NAME_LENGTH and long_name.endswith("-a100-80gb-x8")
    assert validate_rfc1123_name(long_name)


# ---- submit ----

def test_submit_creates_one_run_per_template(sweep_70b, api_key, monkeypatch):
    runs = with_repo(platform.build_run_configs(sweep_70b, TEMPLATES))
    calls = []

    def create_run(run_config, **kwargs):
        calls.append(run_config)
        return SimpleNamespace(name=f"{run_config.name}-x1y2z3")

    monkeypatch.setattr(mcli, "create_run", create_run)
    names = platform.submit(runs)
    assert calls == runs and all(a is b for a, b in zip(calls, runs))
    assert names == [f"{r.name}-x1y2z3" for r in runs]
    assert platform.follow_command(names[0]) == f"mcli logs {names[0]} --follow"


def _refuse_create(monkeypatch):
    def create_run(*args, **kwargs):
        raise AssertionError("create_run called")

    monkeypatch.setattr(mcli, "create_run", create_run)


def test_submit_without_api_key_submits_nothing(sweep_70b, no_key, monkeypatch):
    _refuse_create(monkeypatch)
    runs = with_repo(platform.build_run_configs(sweep_70b, TEMPLATES))
    with pytest.raises(UserError, match=r"set MOSAICML_API_KEY or run `mcli set api-key`"):
        platform.submit(runs)


def test_submit_refuses_the_placeholder_repo_before_creating_anything(sweep_70b, api_key, monkeypatch):
    _refuse_create(monkeypatch)
    runs = platform.build_run_configs(sweep_70b, TEMPLATES)
    with pytest.raises(UserError, match="git_repo is still the placeholder 'YOUR-ORG/"):
        platform.submit(runs)


def test_submit_refuses_a_config_the_sdk_rejects_before_creating_anything(sweep_70b, api_key, monkeypatch):
    _refuse_create(monkeypatch)
    runs = with_repo(platform.build_run_configs(sweep_70b, TEMPLATES))
    runs[-1].image = "Not A Valid Image"
    with pytest.raises(UserError, match="is not valid; nothing was submitted"):
        platform.submit(runs)


def test_submit_failure_midway_names_the_runs_already_created(sweep_70b, api_key, monkeypatch):
    runs = with_repo(platform.build_run_configs(sweep_70b, TEMPLATES[:2]))
    replies = iter([SimpleNamespace(name="first-abc123"), MAPIException(HTTPStatus.BAD_REQUEST, "no such cluster")])

    def create_run(run_config, **kwargs):
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(mcli, "create_run", create_run)
    with pytest.raises(UserError, match=r"Error 400: no such cluster; already submitted: first-abc123"):
        platform.submit(runs)


# ---- the log protocol ----

def live_log(results_dir: Path, scratch: Path) -> str:
    """The log of a run with --emit-log-markers: the manifest at the start, new CSV rows after each point
    (CsvTail, as the files grow), full dumps at the end; setup and progress noise around them."""
    results = logmarkers.split_records(read_exact(results_dir / "results.csv"))[0]
    samples = logmarkers.split_records(read_exact(results_dir / "samples.csv"))[0]
    per_point = (len(samples) - 1) // (len(results) - 1)
    manifest = json.loads(read_exact(results_dir / "manifest.json"))
    manifest.pop("end_time")
    out = ["Cloning into '/workspace/llm-inference-benchmark'...\n", "Successfully installed vllm\n",
           logmarkers.emit_file("manifest.json", json.dumps(manifest, indent=2) + "\n")]
    tails = [logmarkers.CsvTail(scratch / "samples.csv"), logmarkers.CsvTail(scratch / "results.csv")]
    for i, row in enumerate(results[1:]):
        with open(scratch / "samples.csv", "a", newline="") as f:
            f.write((samples[0] if i == 0 else "") + "".join(samples[1 + i * per_point: 1 + (i + 1) * per_point]))
        with open(scratch / "results.csv", "a", newline="") as f:
            f.write((results[0] if i == 0 else "") + row)
        out += [tail.emit_new() for tail in tails] + [f"point {i + 1}/{len(results) - 1} done\n"]
    out.append("Results in /workspace/llm-inference-benchmark/results/tiny-cpu/\n")
    return "".join(out) + "".join(logmarkers.emit_path(results_dir / name) for name in FILES)


def test_fixture_log_rebuilds_every_file_exactly():
    files = logmarkers.parse(read_exact(FIXTURES / "tiny-cpu.log"))
    assert files == {name: read_exact(EXPECTED / name) for name in FILES}


def test_live_log_rebuilds_every_file_exactly(tmp_path):
    files = logmarkers.parse(live_log(EXPECTED, tmp_path))
    assert files == {name: read_exact(EXPECTED / name) for name in FILES}


def test_log_prefixes_crlf_and_stripped_whitespace_are_tolerated():
    lines = read_exact(FIXTURES / "tiny-cpu.log").split("\n")
    mangled = "\n".join(f"2024-05-01T12:00:00.{i:06d}Z stdout F {line.rstrip()}\r" for i, line in enumerate(lines))
    assert logmarkers.parse(mangled) == {name: read_exact(EXPECTED / name) for name in FILES}


def test_truncation_anywhere_leaves_a_prefix_of_the_rows():
    log = read_exact(FIXTURES / "tiny-cpu.log")
    expected = {n: logmarkers.split_records(read_exact(EXPECTED / n))[0] for n in ("results.csv", "samples.csv")}
    seen = {n: 0 for n in expected}
    for cut in range(0, len(log) + 1, 11):
        files = logmarkers.parse(log[:cut])
        for name, records in expected.items():
            got = logmarkers.split_records(files.get(name, ""))[0]
            assert got == records[: len(got)] and len(got) >= seen[name], (name, cut)
            seen[name] = len(got)
    assert seen == {n: len(r) for n, r in expected.items()}


def test_cut_inside_a_row_keeps_the_rows_before_it():
    log = read_exact(FIXTURES / "tiny-cpu.log")
    third_row = log.index("@@BENCH-ROW results.csv", log.index("@@BENCH-ROW results.csv", log.index(
        "@@BENCH-ROW results.csv") + 1) + 1)
    files = logmarkers.parse(log[: third_row + 60])
    records = logmarkers.split_records(read_exact(EXPECTED / "results.csv"))[0]
    assert files["results.csv"] == "".join(records[:3])  # header and the first two points


def test_cut_inside_the_final_dump_falls_back_to_rows_and_the_first_manifest():
    log = read_exact(FIXTURES / "tiny-cpu.log")
    files = logmarkers.parse(log[: log.index("@@BENCH-BEGIN samples.csv") + 300])
    assert files["results.csv"] == read_exact(EXPECTED / "results.csv")  # its dump completed
    assert files["samples.csv"] == read_exact(EXPECTED / "samples.csv")  # from rows: every point had printed
    assert "end_time" not in json.loads(files["manifest.json"])  # the start-of-run dump


TEXTS = ["", "a", "a\n", "h1,h2\r\n1,2\r\n", "mixed\r\nand\nends", "tab\there and a trailing space ",
         "back\\slash \\n is not a newline\\", "unicode é 中 \u2028 separator \x85", "ctrl \x00\x1b\x7f end  "]


@pytest.mark.parametrize("text", TEXTS)
def test_emit_file_round_trips_any_text(text):
    emitted = logmarkers.emit_file("f.txt", text)
    assert all(line.startswith("@@BENCH-") and line == line.rstrip() for line in emitted.split("\n")[:-1])
    assert logmarkers.parse(emitted) == {"f.txt": text}


def _csv_text(rows) -> str:
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def test_rows_round_trip_with_quotes_commas_and_newlines():
    text = _csv_text([["status", "error"], ["error", 'CUDA "OOM", tried\nto allocate'], ["ok", " padded "]])
    records, rest = logmarkers.split_records(text)
    assert len(records) == 3 and rest == ""
    emitted = logmarkers.emit_rows("r.csv", records[0], records[1:])
    assert logmarkers.parse(emitted + emitted) == {"r.csv": text}  # a row printed twice counts once


def test_altered_row_and_incomplete_dump_are_rejected():
    text = _csv_text([["a", "b"], ["1", "2"], ["3", "4"]])
    records = logmarkers.split_records(text)[0]
    rows = logmarkers.emit_rows("r.csv", records[0], records[1:]).replace(",4", ",5")
    dump = logmarkers.emit_file("r.csv", text + _csv_text([["5", "6"]]))
    without_a_line = "\n".join(line for line in dump.split("\n") if "5,6" not in line)
    assert logmarkers.parse(rows + without_a_line) == {"r.csv": "".join(records[:2])}


def test_a_complete_dump_supersedes_rows():
    text = _csv_text([["a"], ["1"], ["2"]])
    records = logmarkers.split_records(text)[0]
    log = logmarkers.emit_row("r.csv", records[0], records[1]) + logmarkers.emit_file("r.csv", text)
    assert logmarkers.parse(log) == {"r.csv": text}


def test_csv_tail_emits_complete_records_only(tmp_path):
    path = tmp_path / "r.csv"
    tail = logmarkers.CsvTail(path)
    assert tail.emit_new() == ""
    path.write_bytes(b'a,b\r\n1,"two\r\nlines"\r\n3,"unfinished')
    first = tail.emit_new()
    with open(path, "ab") as f:
        f.write(b' quote"\r\n')
    second = tail.emit_new()
    assert tail.emit_new() == ""
    assert logmarkers.parse(first + second) == {"r.csv": read_exact(path)}
    assert first.count("@@BENCH-ROW") == 1 and second.count("@@BENCH-ROW") == 1


def test_csv_tail_starts_over_when_the_file_is_replaced(tmp_path):
    """A batch search marks its largest batch by replacing results.csv with a longer one: the old offset would fall
    inside a record."""
    path = tmp_path / "r.csv"
    path.write_bytes(b"batch,max\r\n8,\r\n16,\r\n")
    tail = logmarkers.CsvTail(path)
    tail.emit_new()
    replaced = tmp_path / "r.csv.tmp"
    replaced.write_bytes(b"batch,max\r\n8,\r\n16,true\r\n,result\r\n")
    os.replace(replaced, path)
    again = tail.emit_new()
    assert logmarkers.parse(again) == {"r.csv": read_exact(path)}
    assert again.count("@@BENCH-ROW") == 3


def test_write_bypasses_the_stdout_proxy_of_a_live_progress_bar(monkeypatch):
    from rich.console import Console
    from rich.progress import Progress

    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    record = ",".join(["12345.678"] * 60) + "\r\n"  # far wider than the terminal
    text = logmarkers.emit_rows("r.csv", "h\r\n", [record])
    with Progress(console=Console(file=io.StringIO(), force_terminal=True, width=80)):
        assert type(sys.stdout).__name__ == "FileProxy"  # what rich installs while the bar is live
        logmarkers.write(text)
    assert stdout.getvalue() == text and logmarkers.parse(stdout.getvalue()) == {"r.csv": "h\r\n" + record}


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", ""])
def test_marker_file_names_are_plain(name):
    with pytest.raises(ValueError):
        logmarkers.emit_file(name, "x")


# ---- collect ----

def fake_logs(monkeypatch, text: str, chunk_chars: int = 1000) -> list:
    """`mcli.get_run_logs` yielding the log in chunks that split lines, as the service's messages do."""
    asked = []

    def get_run_logs(run, **kwargs):
        asked.append(run)
        yield from (text[i: i + chunk_chars] for i in range(0, len(text), chunk_chars))

    monkeypatch.setattr(mcli, "get_run_logs", get_run_logs)
    return asked


def test_collect_rebuilds_the_results_folder(api_key, monkeypatch, tmp_path):
    asked = fake_logs(monkeypatch, read_exact(FIXTURES / "tiny-cpu.log"))
    folders = platform.collect([RUN], tmp_path / "results")
    assert asked == [RUN] and folders == [tmp_path / "results" / RUN]
    for name in FILES:
        assert (folders[0] / name).read_bytes() == (EXPECTED / name).read_bytes()
    assert sorted(p.name for p in folders[0].iterdir()) == sorted(FILES)


def test_collect_of_a_killed_run_keeps_its_complete_rows(api_key, monkeypatch, tmp_path):
    log = read_exact(FIXTURES / "tiny-cpu.log")
    fake_logs(monkeypatch, log[: log.index("@@BENCH-BEGIN results.csv") - 1])
    (folder,) = platform.collect([RUN], tmp_path)
    assert (folder / "results.csv").read_bytes() == (EXPECTED / "results.csv").read_bytes()
    assert (folder / "samples.csv").read_bytes() == (EXPECTED / "samples.csv").read_bytes()


def test_collect_without_api_key_fetches_nothing(no_key, monkeypatch, tmp_path):
    assert fake_logs(monkeypatch, "") == []
    with pytest.raises(UserError, match="MOSAICML_API_KEY"):
        platform.collect([RUN], tmp_path)


@pytest.mark.parametrize("log, expected", [
    ("pip install ...\nTraceback (most recent call last):\n", "no results yet"),
    ("", "no results yet"),
])
def test_collect_of_a_log_without_results_writes_nothing(api_key, monkeypatch, tmp_path, log, expected):
    fake_logs(monkeypatch, log)
    with pytest.raises(UserError, match=expected):
        platform.collect([RUN], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_collect_reports_a_platform_error_in_one_line(api_key, monkeypatch, tmp_path):
    def get_run_logs(run, **kwargs):
        raise MAPIException(HTTPStatus.NOT_FOUND, f"Run {run} not found")
        yield  # a generator, like the SDK's

    monkeypatch.setattr(mcli, "get_run_logs", get_run_logs)
    with pytest.raises(UserError, match=f"--collect {RUN}: Error 404: Run {RUN} not found"):
        platform.collect([RUN], tmp_path)


def test_collect_refuses_a_name_that_is_not_a_run(api_key, tmp_path):
    with pytest.raises(UserError, match="is not a run name"):
        platform.collect(["../elsewhere"], tmp_path)

"""What a sweep sends to its trackers, without one: the parameters, tags and metrics made from a results folder, the
state that continues a folder's runs, and the trackers a finished folder is sent to (docs/guides/tracking.md). Against
a real MLflow server and W&B offline: tests/test_tracking_e2e.py."""

import json

import pytest

from harness.config.sections import TrackingConfig
from harness.errors import UserError
from harness.track import content
from harness.track.state import read_state, write_state
from harness.track.sync import FolderTracking, folder_tracking_config, short_reason

MANIFEST = {"config": {"benchmark_name": "b", "batch_sizes": [1, 2], "stream": {"slo": {"ttft_ms": 500}},
                       "backends": [{"name": "hf"}]},
            "model": {"label": "tiny-llama"}, "git_commit": "abc", "start_time": "2026-11-29T06:00:00",
            "hardware": {"cpu_model": "AMD EPYC", "cpu_cores": 2, "gpus": []}, "software": {"torch": "2.13.0"},
            "backends": [{"label": "hf", "model": "tiny-llama", "options": {"name": "hf", "grid": {}},
                          "placement": {"device": "cpu"}}]}


def test_the_config_is_sent_as_dotted_parameters_and_the_machine_as_tags():
    params = content.sweep_params(MANIFEST)
    assert params == {"benchmark_name": "b", "batch_sizes": "[1, 2]", "stream.slo.ttft_ms": "500"}  # no entries
    assert content.entry_params(MANIFEST["backends"][0]) == {"options.name": "hf", "options.grid": "{}",
                                                             "placement.device": "cpu"}
    assert content.flat({"backends": [{"name": "hf"}, {"name": "vllm"}]}) == {"backends.0.name": "hf",
                                                                                "backends.1.name": "vllm"}
    assert content.flat({"text": "x" * 7000})["text"] == "x" * content.MAX_PARAM_CHARS
    assert content.tags(MANIFEST) == {"hardware.cpu_model": "AMD EPYC", "hardware.cpu_cores": "2",
                                      "software.torch": "2.13.0", "git_commit": "abc",
                                      "start_time": "2026-11-29T06:00:00", "benchmark_name": "b"}


def test_a_rows_figures_are_its_metrics_keyed_by_its_point():
    batch = {"scenario": "batch", "batch_size": "8", "input_length": "128", "output_length": "64", "status": "ok",
             "latency_ms_p50": "12.5", "ttft_ms_p50": "", "peak_memory_bytes": "1000", "saturated": "false",
             "tpot_ms_p50": "inf", "error": ""}
    assert content.point_name(batch) == "bs8_in128_out64"
    assert content.row_metrics(batch) == {"latency_ms_p50": 12.5, "peak_memory_bytes": 1000.0}  # finite numbers
    stream = {"scenario": "stream", "request_rate": "2", "input_length": "65", "output_length": "16",
              "max_concurrency": "4"}
    assert content.point_name(stream) == "rate2_c4_in65_out16"
    assert content.point_name({**stream, "request_rate": "inf", "max_concurrency": ""}) == "burst_in65_out16"
    assert content.point_name({**stream, "input_length": ""}) == "rate2_c4_intrace_out16"
    assert content.row_metrics({**batch, "status": "oom"}) == {}  # only ok rows are figures
    assert content.point_metrics([batch, {**batch, "status": "error"}]) == {"bs8_in128_out64": {
        "latency_ms_p50": 12.5, "peak_memory_bytes": 1000.0}}
    assert not set(content.FIGURES) & {"batch_size", "input_length", "request_rate", "status", "backend"}


def test_each_entry_is_a_run_of_its_own_named_by_its_model_where_several(tmp_path):
    several = {**MANIFEST, "models": [{"label": "a"}, {"label": "b"}],
               "backends": [{"label": "hf", "model": "a"}, {"label": "hf", "model": "b"}]}
    runs = content.entry_runs(several)
    assert [(m, e) for m, e, _ in runs] == [("a", "hf"), ("b", "hf")]
    assert content.run_name("a", "hf", True) == "a / hf" and content.run_name("a", "hf", False) == "hf"


def test_tracking_json_is_written_whole_and_a_damaged_one_is_refused(tmp_path):
    assert read_state(tmp_path) == {}
    write_state(tmp_path, {"mlflow": {"run_id": "r1"}})
    assert read_state(tmp_path) == {"mlflow": {"run_id": "r1"}}
    assert not (tmp_path / "tracking.json.tmp").exists()
    (tmp_path / "tracking.json").write_text('{"mlflow": {"run_id": "r1"')  # cut short
    with pytest.raises(UserError, match=rf"^{tmp_path}/tracking.json: not JSON .*restore it, or remove it"):
        read_state(tmp_path)
    (tmp_path / "tracking.json").write_text('["r1"]')
    with pytest.raises(UserError, match=r"expected an object of trackers"):
        read_state(tmp_path)


def test_a_folder_goes_to_its_sweeps_trackers_or_those_named_and_its_runs_stay_where_they_are(tmp_path):
    (tmp_path / "config.yaml").write_text("benchmark_name: b\ntracking:\n  wandb: {mode: offline}\n")
    tracking = folder_tracking_config(tmp_path)
    assert tracking.mlflow is None and tracking.wandb.mode == "offline"
    tracking = folder_tracking_config(tmp_path, mlflow_uri="http://127.0.0.1:5000", wandb_project="p")
    assert tracking.mlflow.tracking_uri == "http://127.0.0.1:5000" and tracking.wandb.project == "p"
    with pytest.raises(UserError, match=r"tracking.mlflow.tracking_uri: 'ftp://x' is not an http:// or https://"):
        folder_tracking_config(tmp_path, mlflow_uri="ftp://x")
    (tmp_path / "config.yaml").write_text("benchmark_name: b\n")
    with pytest.raises(UserError, match=r"its sweep named no tracker \(no tracking section\); give --mlflow-uri"):
        folder_tracking_config(tmp_path)
    write_state(tmp_path, {"mlflow": {"tracking_uri": "http://127.0.0.1:5000"}})
    with pytest.raises(UserError, match=r"runs are in http://127.0.0.1:5000 \(tracking.json\), not "
                                        r"http://127.0.0.1:6000; track it there"):
        FolderTracking(tmp_path, folder_tracking_config(tmp_path, mlflow_uri="http://127.0.0.1:6000"))


def test_a_tracker_that_fails_is_said_once_and_the_rest_goes_on(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    tracking = FolderTracking(tmp_path, TrackingConfig())
    calls = []

    def failing():
        calls.append(1)
        raise ConnectionError("[Errno 111] Connection refused")

    first = tracking._guarded("mlflow", failing)
    assert first == [f"tracking.mlflow: cannot reach the server (connection refused); the results are in {tmp_path}; "
                     f"send them later with python -m plots --track {tmp_path}"]
    assert tracking._guarded("mlflow", failing) == [] and len(calls) == 1  # left alone after its first failure
    assert short_reason(ValueError("x " * 200)) == "ValueError: " + ("x " * 200).strip()[:200]


def test_a_tracker_whose_client_is_missing_is_refused_before_the_sweep(monkeypatch):
    import importlib.util

    from harness.config.sections import WandbConfig, validate_tracking

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "wandb" else real(name, *rest))
    with pytest.raises(UserError, match=r"^tracking.wandb: W&B's client is not installed here: pip install -r "
                                        r"requirements-tracking.txt$"):
        validate_tracking(TrackingConfig(wandb=WandbConfig(mode="offline")))


def test_mlflow_credentials_come_from_its_own_environment_variables(monkeypatch):
    from harness.track.mlflow_rest import MlflowRest

    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert "Authorization" not in MlflowRest("http://127.0.0.1:5000/").headers
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ann")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw")
    assert MlflowRest("http://h:5000").headers["Authorization"] == "Basic YW5uOnB3"  # base64 of ann:pw
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "t0k")
    rest = MlflowRest("http://h:5000/")
    assert rest.headers["Authorization"] == "Bearer t0k" and rest.base == "http://h:5000"

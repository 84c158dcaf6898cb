"""Sweeps sent to a real MLflow tracking server on 127.0.0.1 (started by the test from .venv-tracking, with a SQLite
store and a local artifact root, always stopped) and to W&B offline, read back with MLflow's own client (from
.venv-tracking: the harness speaks MLflow's REST API and has no MLflow package) and W&B's own files: a sweep
killed and resumed is one run per entry with its parameters and every point once; a tracker that is down costs the
sweep one line, W&B beside it gets everything, and `python -m plots --track` sends the folder to MLflow later, the
artifacts among it; every metric equal to results.csv. On the null engine (backends/synthetic.py): what is tested is
the tracking, not an engine."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.run.process_group import free_port
from tests.conftest import REPO, run_benchmark
from tests.test_resume import wait_for_rows

MLFLOW = REPO / ".venv-tracking" / "bin" / "mlflow"  # make setup installs MLflow there (its own venv)
# MLflow's client, there: every run of an experiment with its parameters, tags, metrics (each with how many values
# it holds) and artifacts, as JSON.
READ_BACK = """
import json, sys
from mlflow import MlflowClient
client = MlflowClient(sys.argv[1])
def files(run_id, path=None):
    for item in client.list_artifacts(run_id, path):
        yield from files(run_id, item.path) if item.is_dir else [item.path]
experiment = client.get_experiment_by_name(sys.argv[2])
runs = []
for run in client.search_runs([experiment.experiment_id]):
    rid = run.info.run_id
    runs.append({"name": run.info.run_name, "run_id": rid, "status": run.info.status, "params": run.data.params,
                 "tags": run.data.tags, "metrics": run.data.metrics, "artifacts": sorted(files(rid)),
                 "values": {k: len(client.get_metric_history(rid, k)) for k in run.data.metrics}})
print(json.dumps(runs))
"""


def mlflow_runs(uri: str, experiment: str):
    """Every run of `experiment`, by name, as MLflow's own client reads them back."""
    read = subprocess.run([str(MLFLOW.with_name("python")), "-c", READ_BACK, uri, experiment], capture_output=True,
                          text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    runs = json.loads(read.stdout)
    assert len({r["name"] for r in runs}) == len(runs), "a run made twice"
    return {r["name"]: r for r in runs}
SWEEP = (
    "benchmark_name: tracked\n"
    "model: {preset: tiny-llama, weights: random, dtype: fp32}\n"
    "backends: [{name: synthetic, ttft_ms: 20, tpot_ms: 6, label: a}, {name: synthetic, ttft_ms: 10, tpot_ms: 3, "
    "label: b}]\n"
    "batch_sizes: [1, 2, 4]\ninput_lengths: [16, 32]\noutput_lengths: [8]\nnum_batches: 2\nnum_warmup_batches: 1\n"
)


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory):
    assert MLFLOW.exists(), "make setup installs MLflow's tracking server into .venv-tracking"
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    with open(folder / "server.log", "w") as log:
        proc = subprocess.Popen([str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                                 "--backend-store-uri", f"sqlite:///{folder / 'store.db'}",
                                 "--artifacts-destination", str(folder / "artifacts")],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (folder / "server.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline, "the MLflow server did not answer within 90 s"
                time.sleep(0.25)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def sweep_yaml(folder: Path, tracking: str) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(SWEEP + f"tracking: {tracking}\n")
    return path


def ok_rows(out: Path):
    return [r for r in csv.DictReader(open(out / "results.csv")) if r["status"] == "ok"]


def assert_every_figure_sent(rows, metrics_of_entry):
    """Each ok row's every figure, as results.csv holds it, under `<point>/<column>` in its entry's run."""
    from harness.track import content

    assert len(rows) == 12
    for row in rows:
        sent = metrics_of_entry(row["backend"])
        figures = content.row_metrics(row)
        assert len(figures) > 20
        for name, value in figures.items():
            assert sent[f"{content.point_name(row)}/{name}"] == pytest.approx(value, rel=1e-12), name


def wandb_run(out: Path, run_id: str):
    """An offline W&B run read from its own files: the run record and its history (every row's values merged),
    from the records of run-<id>.wandb (W&B's protobuf Records, in LevelDB's log format)."""
    from wandb.proto import wandb_internal_pb2

    (folder,) = out.glob(f"wandb/offline-run-*-{run_id}")
    record, history, run = wandb_internal_pb2.Record(), {}, None
    for data in leveldb_log_records((folder / f"run-{run_id}.wandb").read_bytes()):
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = wandb_internal_pb2.RunRecord()
            run.CopyFrom(record.run)
        elif kind == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                assert key.startswith("_") or key not in history, f"{key} sent twice"
                history[key] = json.loads(item.value_json)
    return {"folder": folder, "run": run, "history": history}


def leveldb_log_records(data: bytes):
    """LevelDB's log format as W&B writes it: a 7-byte header (`:W&B`, its magic, a version), then 32 KiB blocks of
    chunks, each a 7-byte header (checksum, length, type: full, first, middle, last) and its bytes."""
    assert data[:4] == b":W&B"
    block, pos, pending = 32768, 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0:  # zeros: the rest of the block is padding
            pos += (block - pos % block) % block
        elif kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk


@pytest.mark.engine
def test_a_sweep_killed_and_resumed_is_one_run_per_entry_with_its_config_and_every_point_once(mlflow_uri, tmp_path):
    """The sweep sends as it runs; killed with SIGKILL after 4 rows (its worker and tracking thread too) and resumed,
    it continues the same runs: one for the sweep, one per entry, every metric holding one value."""
    yaml = sweep_yaml(tmp_path, f"{{mlflow: {{tracking_uri: '{mlflow_uri}', experiment: resumed}}}}")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmark.py"), str(yaml), "--output-dir", str(out),
                             "--no-plots"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_for_rows(proc, out / "results.csv", 4)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep, its worker and its tracking thread mid-way
        proc.wait()
    assert 4 <= len(ok_rows(out)) < 12
    result = run_benchmark(yaml, "--output-dir", out, "--resume", "--no-plots")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Tracked in mlflow: {mlflow_uri}, run " in result.stdout
    assert json.loads((out / "manifest.json").read_text())["tracking"]["mlflow"]["result"] == "sent"
    runs = mlflow_runs(mlflow_uri, "resumed")
    assert sorted(runs) == ["a", "b", "out"]  # the sweep's run, named after its folder, and one per entry, once
    sweep = runs["out"]
    assert sweep["run_id"] == json.loads((out / "tracking.json").read_text())["mlflow"]["run_id"]
    assert sweep["status"] == "FINISHED"
    assert sweep["params"]["batch_sizes"] == "[1, 2, 4]" and sweep["params"]["seed"] == "0"
    for name in ("a", "b"):
        run = runs[name]
        assert run["tags"]["mlflow.parentRunId"] == sweep["run_id"] and run["status"] == "FINISHED"
        assert run["params"]["options.ttft_ms"] == ("20.0" if name == "a" else "10.0")
        assert set(run["values"].values()) == {1}  # every metric sent once, not again on resume
    assert_every_figure_sent(ok_rows(out), lambda entry: runs[entry]["metrics"])


@pytest.mark.engine
def test_a_tracker_that_is_down_costs_one_line_and_the_folder_is_sent_later(mlflow_uri, tmp_path):
    """MLflow down, W&B offline beside it: the sweep ends with its rows and one line, W&B holds everything, and
    `python -m plots --track` sends the folder to MLflow afterwards, the charts' reports among its files."""
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    yaml = sweep_yaml(tmp_path, f"{{mlflow: {{tracking_uri: '{down}', experiment: later}}, wandb: {{mode: offline}}}}")
    out = tmp_path / "out"
    started = time.monotonic()
    result = run_benchmark(yaml, "--output-dir", out)
    assert result.returncode == 0 and len(ok_rows(out)) == 12
    assert time.monotonic() - started < 60
    printed = " ".join(result.stdout.split())  # the console wraps long lines
    assert printed.count("tracking.mlflow") == 1
    assert (f"warning: tracking.mlflow: cannot reach the server (connection refused); the results are in {out}; send "
            f"them later with python -m plots --track {out}") in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tracking"]["mlflow"] == {"result": "failed",
                                              "error": "cannot reach the server (connection refused)"}
    assert manifest["tracking"]["wandb"]["result"] == "sent"
    # W&B, offline under the folder's wandb/: a run per entry and one for the sweep, as W&B's own files hold them
    state = json.loads((out / "tracking.json").read_text())
    logged = {name: wandb_run(out, e["run_id"]) for name, e in state["wandb"]["entries"].items()}
    assert_every_figure_sent(ok_rows(out), lambda entry: logged[entry]["history"])
    sweep_files = wandb_run(out, state["wandb"]["run_id"])
    assert (sweep_files["folder"] / "files" / "results.csv").read_text() == (out / "results.csv").read_text()
    assert (sweep_files["folder"] / "files" / "plots" / "report.md").is_file()
    assert sweep_files["run"].run_group == "out" and logged["a"]["run"].job_type == "entry"
    # MLflow, later
    sent = subprocess.run([sys.executable, "-m", "plots", "--track", str(out), "--mlflow-uri", mlflow_uri],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith(f"{out}: tracked in mlflow: {mlflow_uri}, run ")
    runs = mlflow_runs(mlflow_uri, "later")
    assert sorted(runs) == ["a", "b", "out"]
    assert runs["out"]["tags"]["hardware.cpu_cores"] == str(manifest["hardware"]["cpu_cores"])
    assert runs["out"]["tags"]["software.torch"] == manifest["software"]["torch"]
    assert {"results.csv", "manifest.json", "plots/report.md", "plots/report.html"} <= set(runs["out"]["artifacts"])
    assert_every_figure_sent(ok_rows(out), lambda entry: runs[entry]["metrics"])
    assert json.loads((out / "manifest.json").read_text())["tracking"]["mlflow"]["result"] == "sent"

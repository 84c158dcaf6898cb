"""`models:`: several models on the same engines and shapes, each (model, entry) in its own worker, the model in
every row's key (resume) and in the charts' series."""

import json
import shutil

import pytest
import yaml

from app.cli import main
from backends.registry import BACKENDS
from harness.config.sweep import load_config
from plots import compare, data, load
from tests.conftest import run_benchmark
from tests.contract import assert_invariants, rows
from workloads.registry import WORKLOADS

TINY = {"preset": "tiny-llama", "dtype": "fp32"}
ONE_LAYER = {"preset": "tiny-llama", "dtype": "fp32", "label": "tiny-1-layer", "overrides": {"num_hidden_layers": 1}}


def write(path, models, **top):
    sweep = {"benchmark_name": "models", "models": models, "backends": [{"name": "hf", "device": "cpu"}],
             "batch_sizes": [1, 2], "input_lengths": [16], "output_lengths": [4], "num_batches": 2,
             "num_warmup_batches": 1, **top}
    path.write_text(yaml.safe_dump(sweep))
    return path


BAD = {
    "empty": ([], "models: must list at least one model section, e.g. [{preset: llama-2-7b}]"),
    "same label twice": ([TINY, TINY], "models[1].label: 'tiny-llama' is already the model of models[0]; give each "
                         "model a unique label"),
    "bad item value": ([TINY, {**TINY, "label": "b", "dtype": "fp8"}],
                       "models[1].dtype: 'fp8' is not one of bf16, fp16, fp32"),
    "bad item preset": ([TINY, {"preset": "tiny-lama"}], "models[1].preset: unknown preset 'tiny-lama'"),
    "bad item override": ([TINY, {**TINY, "label": "b", "overrides": {"num_layerz": 1}}],
                          "models[1].overrides.num_layerz: not a field of LlamaConfig"),
    "bad item architecture": ([TINY, {"preset": "mpt-7b", "overrides": {"expansion_ratio": 2}}],
                              "models[1].overrides.expansion_ratio: 2 is not what transformers builds for model_type mpt"),
    "empty label": ([{**TINY, "label": ""}], "models[0].label: must not be empty; leave it out for its default"),
}


@pytest.mark.parametrize("models,message", BAD.values(), ids=BAD.keys())
def test_bad_models_exit_2_naming_the_item(models, message, tmp_path, capsys):
    assert main([str(write(tmp_path / "m.yaml", models)), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_model_and_models_together_is_an_error(tmp_path, capsys):
    path = write(tmp_path / "m.yaml", [TINY], model=TINY)
    assert main([str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == "error: models: give `model` (one) or `models` (a list to compare), not both\n"


def test_plan_and_dry_run_name_each_model(tmp_path, capsys):
    path = write(tmp_path / "m.yaml", [TINY, ONE_LAYER])
    assert main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("tiny-1-layer") == 2 + 1 + 1  # its two points, its model line and its workload line
    assert "4 of 4 points fit" in out
    assert main([str(path), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "memory estimate of tiny-llama" in out and "memory estimate of tiny-1-layer" in out


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    config = write(folder / "m.yaml", [TINY, ONE_LAYER])
    out = folder / "out"
    proc = run_benchmark(config, "--output-dir", out, "--no-plots")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return config, out, proc


@pytest.mark.engine
def test_each_model_runs_every_entry_in_its_own_worker(swept):
    _, out, proc = swept
    got = rows(out / "results.csv")
    assert sorted((r["model"], r["backend"], r["batch_size"]) for r in got) == [
        ("tiny-1-layer", "hf", "1"), ("tiny-1-layer", "hf", "2"), ("tiny-llama", "hf", "1"), ("tiny-llama", "hf", "2")]
    for r in got:
        assert_invariants(r)
    assert (out / "logs" / "tiny-llama" / "hf.log").is_file() and (out / "logs" / "tiny-1-layer" / "hf.log").is_file()
    assert "[tiny-1-layer / hf] bs 2" in proc.stdout


@pytest.mark.engine
def test_manifest_describes_each_model(swept):
    _, out, _ = swept
    manifest = json.loads((out / "manifest.json").read_text())
    assert "model" not in manifest
    models = {m["label"]: m for m in manifest["models"]}
    assert models["tiny-1-layer"]["architecture"]["num_hidden_layers"] == 1
    assert models["tiny-llama"]["architecture"]["num_hidden_layers"] == 2
    assert models["tiny-1-layer"]["num_params"] < models["tiny-llama"]["num_params"]
    assert all("workload" in m and "token_crosscheck" in m and "hf" in m["hardware_peaks"] for m in models.values())
    assert [(e["model"], e["label"]) for e in manifest["backends"]] == [("tiny-llama", "hf"), ("tiny-1-layer", "hf")]
    assert all(e["runtime"]["architecture"] == models[e["model"]]["architecture"] for e in manifest["backends"])


@pytest.mark.engine
def test_the_written_config_reruns_as_is(swept):
    _, out, _ = swept
    config = load_config(out / "config.yaml", [], BACKENDS, WORKLOADS)
    assert [m.label for m in config.models] == [None, "tiny-1-layer"]
    assert "model" not in yaml.safe_load((out / "config.yaml").read_text())


@pytest.mark.engine
def test_charts_draw_one_curve_per_model(swept):
    _, out, _ = swept
    table = data.with_series(load.to_numbers(load.load_results([out])))
    curves = data.build_curves(table, "throughput_tokens_per_s", "latency_ms_mean")
    assert sorted(c.name for c in curves) == ["tiny-1-layer", "tiny-llama"]
    assert all(sorted(c.batch_sizes) == [1, 2] for c in curves)


@pytest.mark.engine
def test_resume_keys_rows_by_model(swept, tmp_path, capsys):
    _, measured, _ = swept
    out = shutil.copytree(measured, tmp_path / "out")
    before = rows(out / "results.csv")
    # A model added on resume runs alone: both measured models' rows count as done, kept as they were, not run again.
    added = write(tmp_path / "added.yaml", [TINY, ONE_LAYER, {**TINY, "label": "tiny-again"}])
    proc = run_benchmark(added, "--output-dir", out, "--resume", "--no-plots")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = rows(out / "results.csv")
    assert after[:4] == before and [r["model"] for r in after[4:]] == ["tiny-again"] * 2
    # One changed under its label is refused, before anything runs (in this process: the refusal is the CLI's).
    changed = write(tmp_path / "changed.yaml", [TINY, {**ONE_LAYER, "dtype": "bf16"}])
    assert main([str(changed), "--output-dir", str(out), "--resume", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume: {out} was measured with models=") and err.count("\n") == 1, err


@pytest.mark.engine
def test_compare_matches_points_model_by_model(swept):
    _, out, _ = swept
    side = compare.read_side(out)
    assert sorted(side.rows) == [("tiny-1-layer", "hf", "random", 1, 16, 4), ("tiny-1-layer", "hf", "random", 2, 16, 4),
                                 ("tiny-llama", "hf", "random", 1, 16, 4), ("tiny-llama", "hf", "random", 2, 16, 4)]
    same = compare.compare(side, side, ["latency_ms_mean"], threshold=0.05)
    assert len(same.points()) == 4 and not same.missing and not same.slower
    assert compare.describe_key(same.points()[0]) == "tiny-1-layer hf bs 1 in 16/out 4"

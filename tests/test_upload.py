"""output.upload_uri: the finished results folder is copied through fsspec; a failed copy only warns (on the null
engine: what is copied is the folder, not any engine's work)."""

import pytest

from tests.conftest import run_benchmark

SMALL = ["backends=[{name: synthetic}]", "batch_sizes=[1]", "input_lengths=[16]", "output_lengths=[2]",
         "num_batches=1", "--no-plots"]


@pytest.mark.engine
def test_results_folder_is_copied(tmp_path):
    out, bucket = tmp_path / "out", tmp_path / "bucket"
    proc = run_benchmark("yamls/cpu-tiny.yaml", *SMALL, "--output-dir", out, f"output.upload_uri=file://{bucket}")
    assert proc.returncode == 0, proc.stderr
    copied = bucket / "out"
    assert (copied / "results.csv").read_bytes() == (out / "results.csv").read_bytes()
    assert (copied / "manifest.json").exists() and (copied / "logs" / "synthetic.log").exists()
    assert f"Copied to file://{copied}" in proc.stdout


@pytest.mark.engine
def test_a_failed_upload_warns_and_keeps_the_results(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the bucket should be")
    out = tmp_path / "out"
    proc = run_benchmark("yamls/cpu-tiny.yaml", *SMALL, "--output-dir", out, f"output.upload_uri=file://{blocker}")
    assert proc.returncode == 0, proc.stderr
    assert f"warning: upload to file://{blocker} failed" in proc.stdout
    assert (out / "results.csv").exists() and blocker.read_text() == "a file where the bucket should be"

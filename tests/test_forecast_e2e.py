"""The forecast against measurements it did not see: a short CPU sweep of tiny-llama on hf, calibrated on all but
one batch size, must put that batch size's measured TPOT inside the interval it prints for it (same machine, so the
floor is the one its rows were measured against), widened by the machine's run-to-run spread (it drifts up to 20%
between runs). Batch 4 is held out, bracketed by 2 and 8. Batch 2 is not: on this 2-core CPU, TPOT is not monotone in
the batch (batch 2 took 7.0-8.6 ms against 4.2-5.2 at 1 and 5.6-7.0 at 4 in each of five sweeps, 2026-11-28: the
CPU's kernels differ by batch size, which no interpolation between batch sizes can know), so held out it fell 20-45%
above its interval; batch 4 fell at most 2% outside the bare interval in four sweeps. A forecast 25% off still
fails. Then the same rows forecast an H100, labelled as a forecast."""

import csv
import json
import shutil

import pytest

from tests.conftest import run_benchmark

SWEEP = ["backends=[{name: hf, device: cpu}]", "batch_sizes=[1,2,4,8]", "input_lengths=[32,128]",
         "output_lengths=[16]", "num_batches=5", "num_warmup_batches=2"]
HELD_OUT = (4,)  # inside the calibrated range: the interval comes from the batch sizes either side
SPREAD = 1.25  # the machine's run-to-run spread around the interval (the module's docstring)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("forecast") / "run"
    proc = run_benchmark("yamls/cpu-tiny.yaml", *SWEEP, "--output-dir", out, "--no-plots")
    assert proc.returncode == 0, proc.stderr
    return out


def _without(folder, batch, into):
    """The results folder less one batch size's rows (and its probe's peaks, the CPU's floor)."""
    into.mkdir()
    shutil.copy(folder / "hardware_peaks.json", into)
    with (folder / "results.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader]
        fields = reader.fieldnames
    with (into / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(r for r in rows if int(r["batch_size"]) != batch)
    return {int(r["input_length"]): float(r["tpot_ms_mean"]) for r in rows if int(r["batch_size"]) == batch}


@pytest.mark.engine
@pytest.mark.parametrize("batch", HELD_OUT)
def test_held_out_tpot_is_inside_the_forecast_interval(measured, batch, tmp_path):
    tpot_ms = _without(measured, batch, tmp_path / "calibration")
    proc = run_benchmark("yamls/cpu-tiny.yaml", *SWEEP[:-2], f"batch_sizes=[{batch}]", "--plan", "--format", "json",
                         "--calibrate", tmp_path / "calibration")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 2
    for line in lines:
        f = line["forecast"]
        measured_ms = tpot_ms[line["input_length"]]
        print(f"batch {batch}, input {line['input_length']}: measured TPOT {measured_ms:.3f} ms, forecast "
              f"{f['tpot_ms']:.3f} ({f['tpot_ms_low']:.3f}-{f['tpot_ms_high']:.3f})")
        assert f["tpot_ms_low"] / SPREAD <= measured_ms <= f["tpot_ms_high"] * SPREAD
        assert f["decode_fraction"]["batch_sizes"] == [batch // 2, batch * 2]


@pytest.mark.engine
def test_the_cpu_rows_forecast_an_h100(measured):
    proc = run_benchmark("yamls/cpu-tiny.yaml", *SWEEP, "--plan", "--calibrate", measured, "hardware.gpu=h100-sxm")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Roofline floors and calibrated forecast on 1 x h100-sxm" in text
    assert "Peaks (every entry): datasheet: h100-sxm" in text and "Forecast: calibrated on" in text

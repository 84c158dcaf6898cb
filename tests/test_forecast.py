"""`--plan --calibrate`: fractions of the floor read back from results rows written here (known MBU and MFU), the
log2(batch) fit and its interval, the forecast, the JSON lines, the charts, and bad input. No engine runs: the
command line runs in process or as `python -c` (a fresh interpreter, to see what it imports)."""

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from app.cli import main, read_results_csv
from harness.errors import UserError
from harness.plan.forecast import DECODE, NEEDED, PREFILL, calibrate
from tests.conftest import REPO

# (batch, input, fraction of the decode floor, fraction of the prefill floor)
KNOWN = [(1, 32, 0.5, 0.2), (1, 128, 0.4, 0.3), (4, 32, 0.8, 0.6), (4, 128, 0.8, 0.7)]


def write_results(folder, rows, backend="hf", columns=NEEDED):
    """Rows whose floors are 1 ms in each phase (1e8 bytes at 100 GB/s; 1e9 FLOPs at 1 TFLOP/s), so that a measured
    time of 1 / fraction ms is that fraction of the floor."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns) + ["input_length", "scenario"], extrasaction="ignore")
        writer.writeheader()
        for batch, input_length, decode, prefill in rows:
            writer.writerow({"backend": backend, "status": "ok", "scenario": "batch", "batch_size": batch,
                             "input_length": input_length, "output_length": 16, "tpot_ms_mean": 1 / decode,
                             "ttft_ms_mean": 1 / prefill, "peak_memory_bandwidth_gbps": 100, "peak_tflops": 1,
                             "decode_bytes_per_step": 1e8, "decode_flops_per_step": 1e6, "prefill_bytes": 1e6,
                             "prefill_flops": 1e9})
        writer.writerow({"backend": backend, "status": "oom", "scenario": "batch", "batch_size": 2})
        # A stream's TPOT is not one step's: left out, however close to the floor it looks.
        writer.writerow({"backend": backend, "status": "ok", "scenario": "stream", "batch_size": 1,
                         "tpot_ms_mean": 1.01, "ttft_ms_mean": 1.01, "peak_memory_bandwidth_gbps": 100,
                         "peak_tflops": 1, "decode_bytes_per_step": 1e8, "decode_flops_per_step": 1e6,
                         "prefill_bytes": 1e6, "prefill_flops": 1e9})
    return folder


def test_calibration_recovers_the_known_fractions(tmp_path):
    cal = calibrate([write_results(tmp_path / "run", KNOWN)], read_results_csv)
    decode, key = cal.curve("hf-tp1", "hf", DECODE)
    assert key == "hf" and sorted(decode.by_batch) == [1, 4]  # the oom row at 2 and the stream row left out
    assert sorted(decode.by_batch[1]) == pytest.approx([0.4, 0.5])
    at1 = decode.at(1)
    assert (at1.value, at1.low, at1.high) == pytest.approx((0.45, 0.4, 0.5))
    # Batch 2 is halfway between 1 and 4 in log2: the medians 0.45 and 0.8 meet at 0.625; the interval spans both.
    at2 = decode.at(2)
    assert (at2.value, at2.low, at2.high) == pytest.approx((0.625, 0.4, 0.8)) and at2.batch_sizes == (1, 4)
    assert decode.at(64).value == pytest.approx(0.8)  # held at the last calibrated value, never extrapolated
    prefill, _ = cal.curve("hf", "hf", PREFILL)
    assert prefill.at(4).value == pytest.approx(0.65) and prefill.at(4).low == pytest.approx(0.6)
    assert cal.curve("vllm", "vllm", DECODE) == (None, "")


def test_a_folder_without_the_columns_is_a_user_error(tmp_path):
    write_results(tmp_path / "old", KNOWN, columns=[c for c in NEEDED if c != "peak_tflops"])
    with pytest.raises(UserError, match="lacks column.*peak_tflops"):
        calibrate([tmp_path / "old"], read_results_csv)
    with pytest.raises(UserError, match="no results.csv"):
        calibrate([tmp_path / "nowhere"], read_results_csv)


def _plan(*args):
    """`--plan` in a fresh interpreter: stdout, stderr, exit code, seconds, and whether torch got imported."""
    code = ("import sys, time; from app.cli import main; t = time.perf_counter(); rc = main(sys.argv[1:]); "
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', time.perf_counter() - t, file=sys.stderr); "
            "sys.exit(rc)")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "250"})  # rich: one table row a line
    return proc, time.perf_counter() - start


def test_plan_for_eight_a100s_is_fast_and_imports_no_torch():
    proc, seconds = _plan("yamls/70b.yaml", "--plan", "hardware.gpu=a100-sxm-80gb", "hardware.num_gpus=8")
    assert proc.returncode == 0, proc.stderr
    assert "NO-TORCH" in proc.stderr and seconds < 5
    assert "Roofline floors on 8 x a100-sxm-80gb" in proc.stdout.replace("\n", " ")
    assert "compute / memory" in proc.stdout  # a long prompt's prefill binds on compute, its decode on memory


def test_json_lines_carry_the_model_floors_and_forecast(tmp_path):
    runs = write_results(tmp_path / "run", KNOWN)
    proc, _ = _plan("yamls/70b.yaml", "--plan", "--format", "json", "--calibrate", runs, "hardware.gpu=h100-sxm",
                    "hardware.num_gpus=8", "batch_sizes=[1,2,4]", "input_lengths=[512]", "output_lengths=[64]")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # every line of stdout is one JSON object
    assert len(lines) == 7 * 3
    vllm = next(x for x in lines if x["backend"] == "vllm-tp8" and x["batch_size"] == 2)
    assert vllm["num_params"] == 68_976_648_192 and vllm["weights_bytes"] == pytest.approx(2 * 68_976_648_192)
    assert vllm["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2  # GQA: 8 KV heads of 128, bf16
    assert vllm["peaks"]["interconnect_gbps"] == 450 and vllm["floors"]["tpot_bound"] == "memory bandwidth"
    assert "interconnect" in vllm["floors"]["tpot_bounds_ms"]
    assert vllm["forecast"] is None and "no calibration for vllm-tp8" in vllm["note"]
    hf = next(x for x in lines if x["backend"] == "hf" and x["batch_size"] == 2)
    f, floors = hf["forecast"], hf["floors"]
    assert f["calibrated_as"] == "hf" and f["tpot_ms"] == pytest.approx(floors["tpot_floor_ms"] / 0.625)
    assert f["tpot_ms_low"] == pytest.approx(floors["tpot_floor_ms"] / 0.8) and not hf["fits"]


def test_charts_are_drawn_and_labelled_forecast(tmp_path):
    runs = write_results(tmp_path / "run", KNOWN)
    proc, _ = _plan("yamls/70b.yaml", "--plan", "--calibrate", runs, "--charts", tmp_path / "charts",
                    "hardware.gpu=h100-sxm", "hardware.num_gpus=8", "batch_sizes=[1,4]", "input_lengths=[512]",
                    "output_lengths=[64]")
    assert proc.returncode == 0, proc.stderr
    drawn = sorted(p.name for p in (tmp_path / "charts").iterdir())
    assert drawn == ["forecast_latency_in512_out64.png", "forecast_per_gpu_vs_per_user_in512_out64.png"]
    assert "dashed: forecast" in proc.stdout


@pytest.mark.parametrize("args, says", [
    (["--calibrate", "nowhere"], "--calibrate: nowhere has no results.csv"),
    (["--format", "xml"], "invalid choice: 'xml'"),
])
def test_bad_calibrate_and_format_exit_2_with_one_line(args, says, capsys):
    assert main(["yamls/cpu-tiny.yaml", "--plan", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_plan_flags_need_plan(capsys):
    assert main(["yamls/cpu-tiny.yaml", "--format", "json"]) == 2
    assert "only with --plan" in capsys.readouterr().err

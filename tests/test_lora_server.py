"""Many LoRA adapters behind one real vLLM server on 127.0.0.1 (tiny-llama, dummy weights, 4 adapters the harness
makes, a Zipf mix), started and stopped by the harness through benchmark.py: every request names its adapter and
the server answers it; requests.csv, results.csv and the report split the point by adapter
(docs/measurement.md, "LoRA adapters")."""

import csv
from collections import Counter

import pytest
import yaml

from harness.scenarios.adapter_mix import draw_adapters
from tests.conftest import REPO, run_benchmark

NUM_REQUESTS = 16


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """yamls/cpu-lora.yaml's entry with 4 adapters (the model in the engine core's process: a faster start), one
    rate: the output folder and the run."""
    config = yaml.safe_load((REPO / "yamls" / "cpu-lora.yaml").read_text())
    entry = config["backends"][0]
    entry.pop("grid")
    entry["lora"]["adapters"] = 4
    entry["command"] = "env VLLM_ENABLE_V1_MULTIPROCESSING=0 " + entry["command"]
    config["backends"] = [entry]
    config["stream"].update(request_rates=[4], num_requests=NUM_REQUESTS, num_warmup_requests=1)
    folder = tmp_path_factory.mktemp("lora")
    path = folder / "lora.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_benchmark(path, "--output-dir", folder / "out")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return folder / "out", config


@pytest.mark.engine
def test_every_request_named_its_adapter_from_the_mix_and_was_served(sweep):
    out, config = sweep
    (row,) = csv.DictReader(open(out / "results.csv"))
    assert row["status"] == "ok" and row["requests_failed"] == "0" and row["lora_adapters"] == "4"
    requests = list(csv.DictReader(open(out / "requests.csv")))
    lora = config["backends"][0]["lora"]
    drawn = draw_adapters(NUM_REQUESTS, 4, "zipf", lora["zipf_exponent"], 0)
    assert [r["adapter"] for r in requests] == [f"lora-{k}" for k in drawn]  # as drawn, in arrival order
    assert all(r["error"] == "" and r["output_tokens"] == "16" for r in requests)
    counts = Counter(r["adapter"] for r in requests)
    assert counts.most_common(1)[0][0] == "lora-0"  # the Zipf law's hot adapter


@pytest.mark.engine
def test_the_report_splits_the_point_by_adapter(sweep):
    out, _ = sweep
    report = (out / "plots" / "report.md").read_text()
    section = report.split("## LoRA adapters", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| lora-") or line.startswith("| all ")]
    named = Counter(r["adapter"] for r in csv.DictReader(open(out / "requests.csv")))
    listed = [(r.split(" | ")[0][2:], int(r.split(" | ")[1])) for r in rows]
    # one row per adapter, most requests first, then all of them
    assert sorted(listed[:-1]) == sorted(named.items()) and listed[-1] == ("all", NUM_REQUESTS)
    assert [n for _, n in listed[:-1]] == sorted(named.values(), reverse=True)

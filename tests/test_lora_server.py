"""Many LoRA adapters behind one real vLLM server on 127.0.0.1 and in vLLM in process (tiny-llama, dummy weights, 4
adapters the harness makes, a Zipf mix), through benchmark.py: every request names its adapter and the engine serves
it, whether loaded at start or found on demand by vLLM's LoRA resolver; requests.csv, results.csv and the report split
each point by adapter (docs/measurement.md, "LoRA adapters")."""

import csv
from collections import Counter

import pytest
import yaml

from harness.scenarios.adapter_mix import draw_adapters
from tests.conftest import REPO, run_benchmark

NUM_REQUESTS = 16


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """yamls/cpu-lora.yaml's entry with 4 adapters, vLLM in process with the same section and the server again with
    the adapters loaded on demand (each with the model in the engine core's process: a faster start), one rate: the
    output folder and the run."""
    config = yaml.safe_load((REPO / "yamls" / "cpu-lora.yaml").read_text())
    entry = config["backends"][0]
    entry.pop("grid")
    entry["lora"]["adapters"] = 4
    entry["command"] = "env VLLM_ENABLE_V1_MULTIPROCESSING=0 " + entry["command"]
    in_process = {"name": "vllm", "label": "vllm-in-process", "enforce_eager": True, "multiprocessing": False,
                  "kv_cache_memory_bytes": 268435456, "lora": entry["lora"]}
    # not told of any adapter: a request naming one the server has not loaded yet has it found in the adapters' folder
    on_demand = {**entry, "label": "vllm-on-demand", "lora": {**entry["lora"], "load": "on_demand"},
                 "command": entry["command"].replace(" --lora-modules {lora_modules}", "")}
    config["backends"] = [entry, in_process, on_demand]
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
    results = list(csv.DictReader(open(out / "results.csv")))
    assert [r["backend"] for r in results] == ["vllm-lora", "vllm-in-process", "vllm-on-demand"]
    for row in results:
        assert row["status"] == "ok" and row["requests_failed"] == "0" and row["lora_adapters"] == "4", row
    lora = config["backends"][0]["lora"]
    drawn = [f"lora-{k}" for k in draw_adapters(NUM_REQUESTS, 4, "zipf", lora["zipf_exponent"], 0)]
    for label in ("vllm-lora", "vllm-in-process", "vllm-on-demand"):
        requests = [r for r in csv.DictReader(open(out / "requests.csv")) if r["backend"] == label]
        assert [r["adapter"] for r in requests] == drawn  # as drawn, in arrival order: both offered the same
        assert all(r["error"] == "" and r["output_tokens"] == "16" for r in requests)
    assert Counter(drawn).most_common(1)[0][0] == "lora-0"  # the Zipf law's hot adapter


@pytest.mark.engine
def test_the_report_splits_the_point_by_adapter(sweep):
    out, _ = sweep
    report = (out / "plots" / "report.md").read_text()
    section = report.split("## LoRA adapters", 1)[1].split("\n## ", 1)[0]
    tables = section.split("\n### ")[1:]
    assert [t.split(",")[0] for t in tables] == ["vllm-lora", "vllm-in-process", "vllm-on-demand"]
    named = Counter(r["adapter"] for r in csv.DictReader(open(out / "requests.csv")) if r["backend"] == "vllm-lora")
    for table in tables:
        rows = [line for line in table.splitlines() if line.startswith("| lora-") or line.startswith("| all ")]
        listed = [(r.split(" | ")[0][2:], int(r.split(" | ")[1])) for r in rows]
        # one row per adapter, most requests first, then all of them
        assert sorted(listed[:-1]) == sorted(named.items()) and listed[-1] == ("all", NUM_REQUESTS)
        assert [n for _, n in listed[:-1]] == sorted(named.values(), reverse=True)

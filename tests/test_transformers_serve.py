"""The `openai` backend against a second real server, not vLLM: `transformers serve` (continuous batching) on
127.0.0.1, started from {checkpoint_dir} (the harness's random weights written as a checkpoint) and always stopped.

tiny-llama's vocabulary is cut to its tokenizer's 3747 tokens: transformers serve streams text, not token ids,
and a token with no text of its own would never arrive. Its /v1/completions takes text prompts only, so the
harness's token-id prompts go to /v1/chat/completions, as a prompt file's conversations.
"""

import csv
import os

import psutil
import pytest
import yaml

from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.model.tokenizer import load_tokenizer
from harness.plan.points import SweepShape
from tests.conftest import REPO, run_benchmark
from tests.test_openai_server import chat_stream, group_members, make_stream

SERVERS_YAML = REPO / "yamls" / "cpu-servers.yaml"


def transformers_entry() -> dict:
    """yamls/cpu-servers.yaml's transformers serve entry: what the README and the demo run."""
    return next(e for e in yaml.safe_load(SERVERS_YAML.read_text())["backends"] if e["label"] == "transformers-serve")


@pytest.fixture(scope="module")
def model():
    return resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32",
                                     overrides={"vocab_size": 3747}))


@pytest.fixture(scope="module")
def server(model):
    entry = {k: v for k, v in transformers_entry().items() if k != "label"}
    options = OpenAIOptions(**entry)
    options.validate("backends[1]")
    backend = OpenAIBackend(options, model, SweepShape(0, 128, 64, scenario="stream"))
    try:
        backend.load()
        backend.serve(chat_stream(2, 4, load_tokenizer(model)))  # warm-up: the first request starts its batching
        yield backend
    finally:
        backend.close()


@pytest.mark.engine
def test_chat_stream_on_transformers_serve(server, model):
    stream = chat_stream(6, 8, load_tokenizer(model))
    timing = server.serve(stream)
    for r, prompt in zip(timing.requests, stream.requests.prompts):
        assert r.ok, r.error
        # exactly the budget (its generation_config turns EOS off), as its usage says
        assert r.output_tokens == 8 and r.output_tokens_source == "usage"
        assert r.input_tokens == len(prompt)  # it applied the chat template the harness counted with
        # text chunks only where tokens decode to some: at least one, never more than one per token
        assert 0 <= len(r.token_gaps_s) <= 7 and r.first_token_s <= r.last_token_s
    assert timing.server is None  # it has no metrics endpoint, which the manifest says
    info = server.runtime_info()
    assert info["server_metrics"] == f"GET {server.base_url}/metrics answered HTTP 404: no server metrics"
    assert info["model"].endswith("checkpoint") and os.path.isfile(os.path.join(info["model"], "model.safetensors"))


@pytest.mark.engine
def test_completions_with_token_ids_are_refused_in_one_line(server):
    """What transformers serve does not support, said plainly: its /v1/completions wants a text prompt."""
    server.client.endpoint = "completions"
    try:
        timing = server.serve(make_stream(1, 4))
    finally:
        server.client.endpoint = "chat"
    (r,) = timing.requests
    assert not r.ok and r.error.startswith("RuntimeError: HTTP 400 from ") and "prompt must be a string" in r.error


@pytest.mark.engine
def test_the_demo_yaml_through_benchmark_py(server, tmp_path):
    """yamls/cpu-servers.yaml's transformers serve entry, shrunk, through benchmark.py: rows, requests, sources. Sent
    to the module's server (started from the same entry's command above) through base_url: a server start less."""
    config = yaml.safe_load(SERVERS_YAML.read_text())
    entry = {k: v for k, v in transformers_entry().items() if k != "command"}
    config["backends"] = [{**entry, "base_url": server.base_url, "model": server.served_model}]
    config["workload"]["prompts"] = str(REPO / "yamls" / "prompts" / "example-chats.jsonl")
    config["output_lengths"] = [8]
    config["stream"].update(request_rates=[4], num_requests=8, num_warmup_requests=2)
    path = tmp_path / "servers.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_benchmark(path, "--output-dir", tmp_path / "out", "--no-plots")
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert row["status"] == "ok" and row["backend"] == "transformers-serve", row["error"]
    assert row["output_tokens_source"] == "usage" and float(row["output_tokens_mean"]) == 8
    requests = list(csv.DictReader(open(tmp_path / "out" / "requests.csv")))
    assert len(requests) == 8 and {r["output_tokens_source"] for r in requests} == {"usage"}


@pytest.mark.engine
def test_close_ends_the_server_and_its_checkpoint(server):
    """The module's server, closed by the last test that asks for it (a server start less; close is idempotent, so
    the fixture's own close after it does nothing)."""
    backend = server
    pid, folder = backend.server_pid, backend.served_model
    assert group_members(pid)
    backend.close()
    assert not group_members(pid)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not os.path.exists(folder)

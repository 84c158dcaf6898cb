"""The `openai` backend against a real vLLM OpenAI-compatible server on 127.0.0.1 (tiny-llama, dummy weights, fp32),
started and stopped by the backend itself; plus server commands that never come up or exit at once. A server that
dies mid-point is tested through benchmark.py (tests/test_stream_e2e.py)."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions, server_root
from backends.registry import BACKENDS
from harness.errors import UserError
from harness.measure.metrics import server_figures
from harness.plan.points import SweepShape
from harness.run.process_group import free_port
from harness.scenarios.arrivals import arrival_times
from harness.scenarios.batch import BatchSpec
from harness.scenarios.stream import StreamSpec
from tests.conftest import REPO
from tests.replay import conversation_stream

# The model in the engine core's process (VLLM_ENABLE_V1_MULTIPROCESSING=0): the server starts 7 s sooner here, and
# its group still holds two processes for close() to end. tests/test_stream_e2e.py keeps vLLM's own processes.
# Guided JSON without free whitespace: random weights under a grammar that allows it fill their budget with it.
# Tool calls: a parser for tool_choice (hermes), and required as a JSON schema of the calls, not hermes's structural
# tag, whose grammar leaves the arguments free (docs/measurement.md, "Tool calls").
VLLM_COMMAND = (
    "env VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_ENFORCE_STRICT_TOOL_CALLING=0 {python} -m vllm.entrypoints.openai.api_server --model {model_dir} --load-format dummy --dtype float32 "
    "--enforce-eager --kv-cache-memory-bytes 268435456 --host 127.0.0.1 --port {port} --max-model-len 512 "
    "--disable-uvicorn-access-log --structured-outputs-config '{\"backend\": \"xgrammar\", \"disable_any_whitespace\": true}' "
    "--enable-auto-tool-choice --tool-call-parser hermes"
)


def make_backend(served, **options) -> OpenAIBackend:
    """An openai entry's backend for the model `served` (options may name the `model` requests send)."""
    opts = OpenAIOptions(name="openai", **options)
    opts.validate("backends[0]")
    return OpenAIBackend(opts, served, SweepShape(0, 128, 64, scenario="stream"))


def sweep_on_server(backend: OpenAIBackend, config: dict, folder: Path) -> subprocess.CompletedProcess:
    """Start `backend`'s server, send every entry of `config` (a sweep's YAML, read) to it through benchmark.py
    (its base_url and served model in place of the entry's command) into folder/out, and stop the server, whatever
    happens: one server start for entries the YAML would start one each for."""
    import yaml

    from tests.conftest import run_benchmark

    try:
        backend.load()
        for entry in config["backends"]:
            entry.pop("command", None)
            entry.update(base_url=backend.base_url, model=backend.served_model)
        path = folder / "sweep.yaml"
        path.write_text(yaml.safe_dump(config))
        result = run_benchmark(path, "--output-dir", folder / "out")
    finally:
        backend.close()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


# The tokenizer's own size: every token the random weights pick decodes to text. The Responses and Messages APIs
# send an event only for a token with text (yamls/cpu-servers.yaml says the same of transformers serve).
TOKENIZER_VOCAB = 3747


@pytest.fixture(scope="module")
def server():
    """One vLLM server for the module (tiny-llama with its tokenizer's vocabulary): started by load(), always
    stopped by close()."""
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    served = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32", overrides={"vocab_size": TOKENIZER_VOCAB}))
    backend = make_backend(served, command=VLLM_COMMAND)
    try:
        backend.load()
        yield backend
    finally:
        backend.close()


def make_stream(n, max_tokens, rate=8.0, arrival="poisson", cap=None, seed=0) -> StreamSpec:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, 128, size=n)
    prompts = [rng.integers(3, TOKENIZER_VOCAB, size=int(length)).tolist() for length in lengths]
    return StreamSpec(BatchSpec(prompts, (max_tokens,) * n), arrival_times(arrival, rate, n, seed), cap)


def group_members(pgid: int):
    """Live (non-zombie) processes of process group `pgid`."""
    members = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return members


def max_in_flight(requests) -> int:
    """The most requests between sent and last token at once (an end before a start at the same instant)."""
    events = sorted([(r.sent_s, 1) for r in requests] + [(r.last_token_s, -1) for r in requests])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_registered_and_options_checked():
    assert BACKENDS.get("openai", "backends[0].name") is OpenAIBackend
    assert OpenAIBackend.unsupported(OpenAIOptions(name="openai"), "batch", None)
    assert OpenAIBackend.unsupported(OpenAIOptions(name="openai"), "stream", None) is None
    bad = [({}, "base_url"), ({"base_url": "http://x", "command": "y {port}"}, "base_url"),
           ({"base_url": "127.0.0.1:8000"}, "base_url"), ({"command": "{python} -m server"}, "command"),
           ({"base_url": "http://x", "extra_body": {"prompt": "hi"}}, "extra_body.prompt"),
           ({"base_url": "http://x", "health_path": "health"}, "health_path"),
           ({"base_url": "http://x", "startup_timeout_s": 0}, "startup_timeout_s"),
           ({"base_url": "http://x", "api_key_env": "BENCH_NO_SUCH_VARIABLE"}, "api_key_env")]
    for options, field in bad:  # read as a YAML entry is: a range is checked as the key is read, the rest by validate
        with pytest.raises(UserError, match=rf"^backends\[0\]\.{field}:"):
            BACKENDS.options({"name": "openai", **options}, "backends[0]").validate("backends[0]")


@pytest.mark.engine
def test_poisson_stream_forced_tokens(server):
    stream = make_stream(12, 8, rate=8.0)
    server.serve(make_stream(4, 8, rate=20.0, seed=1))  # warm-up
    timing = server.serve(stream)
    assert len(timing.requests) == 12 and [r.index for r in timing.requests] == list(range(12))
    for r, prompt in zip(timing.requests, stream.requests.prompts):
        assert r.ok, r.error
        assert r.output_tokens == 8 and r.input_tokens == len(prompt)
        assert timing.start_s <= r.scheduled_s <= r.dispatched_s <= r.sent_s <= r.first_token_s <= r.last_token_s
        assert r.last_token_s <= timing.end_s
        assert r.dispatched_s - r.scheduled_s < 0.1  # the client releases requests on time
        # One gap per chunk after the first; vLLM may coalesce tokens into one chunk, never drop them.
        assert 1 <= len(r.token_gaps_s) <= 7 and all(g >= 0 for g in r.token_gaps_s)
        assert sum(r.token_gaps_s) == pytest.approx(r.last_token_s - r.first_token_s, abs=1e-9)
    offsets = [r.scheduled_s - timing.start_s for r in timing.requests]
    assert offsets == pytest.approx(stream.arrivals_s, abs=1e-6)


@pytest.mark.engine
def test_max_concurrency_respected(server):
    stream = make_stream(8, 8, arrival="burst", cap=2)
    timing = server.serve(stream)
    assert all(r.ok and r.output_tokens == 8 for r in timing.requests), [r.error for r in timing.requests]
    assert max_in_flight(timing.requests) == 2
    # Waiting for a slot counts: the later requests were sent well after they were due.
    assert max(r.sent_s - r.scheduled_s for r in timing.requests) > 0


def test_base_url_is_taken_with_or_without_v1():
    for given in ("http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1",
                  "http://127.0.0.1:8000/v1/", " http://127.0.0.1:8000/v1 "):
        assert server_root(given) == "http://127.0.0.1:8000"
    assert server_root("https://gateway.example/llm/v1") == "https://gateway.example/llm"
    options = OpenAIOptions(name="openai", base_url="http://127.0.0.1:8000/v1/")
    assert OpenAIBackend.destination(options) == "requests to http://127.0.0.1:8000/v1/completions"


@pytest.mark.engine
@pytest.mark.parametrize("suffix", ["/", "/v1"])
def test_running_server_by_url(server, model, suffix):
    """base_url mode on the same server, written both ways users write it: the model id comes from /v1/models,
    health from the root, extra_body reaches vLLM."""
    client = make_backend(model, base_url=server.base_url + suffix, extra_body={"return_token_ids": True})
    client.load()
    try:
        info = client.runtime_info()
        assert info["model"] == server.served_model and info["server_version"] and "command" not in info
        timing = client.serve(make_stream(3, 5, rate=20.0))
        for r in timing.requests:
            assert r.ok and r.output_tokens == 5 and r.token_ids is not None and len(r.token_ids) == 5
    finally:
        client.close()


def chat_stream(n: int, max_tokens: int, tokenizer) -> StreamSpec:
    """n conversations (a system prompt, one exchange, a question) with the harness's count of each under the
    tokenizer's chat template, as the prompts workload makes them."""
    conversations = tuple((("system", "Answer briefly."), ("user", f"Name {i + 2} prime numbers."),
                           ("assistant", "2, 3."), ("user", "Why" + " and why" * i + "?")) for i in range(n))
    prompts = [tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in conv], tokenize=True,
                                             add_generation_prompt=True)["input_ids"] for conv in conversations]
    requests = BatchSpec(prompts, (max_tokens,) * n, messages=conversations)
    return StreamSpec(requests, arrival_times("poisson", 20.0, n, 0))


@pytest.mark.engine
def test_chat_completions_send_the_conversation(server, model):
    """endpoint: chat: vLLM applies the same chat template the harness counted with (the tiny-llama tokenizer's,
    copied into {model_dir}), forces the budget, and reports its counts in usage."""
    client = make_backend(model, base_url=server.base_url + "/v1", endpoint="chat")
    assert OpenAIBackend.destination(client.options) == f"requests to {server.base_url}/v1/chat/completions"
    client.load()
    try:
        stream = chat_stream(4, 6, client.client.tokenizer)
        timing = client.serve(stream)
        for r, prompt in zip(timing.requests, stream.requests.prompts):
            assert r.ok, r.error
            assert r.output_tokens == 6 and r.output_tokens_source == "usage"
            assert r.input_tokens == len(prompt)  # the server's count, equal to the harness's
            assert r.first_token_s <= r.last_token_s and 1 <= len(r.token_gaps_s) <= 5
        # a stream without conversations cannot go to the chat endpoint (the config check refuses such a sweep)
        with pytest.raises(RuntimeError, match="^endpoint: chat needs the prompts' conversations"):
            client.serve(make_stream(2, 4))
    finally:
        client.close()


@pytest.mark.engine
@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_the_responses_and_messages_apis_are_read_from_their_own_events(server, model, endpoint):
    """endpoint: responses (OpenAI's) and messages (Anthropic's), on the same server and prompts as chat: a token
    per text event, the server's usage for the counts (the prompt as the harness counted it under the same chat
    template), the response ended by its own closing event. The Messages API cannot force the length: the budget
    is only checked (greedy on vLLM's seeded dummy weights: the same answers every run, none ending early).
    vLLM's Responses path tokenizes the templated prompt with the tokenizer's special tokens on (its chat path has
    them off): one BOS more than the chat API's count."""
    client = make_backend(model, base_url=server.base_url, endpoint=endpoint)
    assert OpenAIBackend.destination(client.options) == f"requests to {server.base_url}/v1/{endpoint}"
    client.load()
    try:
        stream = chat_stream(4, 6, client.client.tokenizer)
        timing = client.serve(stream)
    finally:
        client.close()
    for r, prompt in zip(timing.requests, stream.requests.prompts):
        assert r.ok, r.error
        assert r.output_tokens == 6 and r.output_tokens_source == "usage"
        assert r.input_tokens == len(prompt) + (endpoint == "responses")
        # an event per step with text: greedy decoding here repeats tokens the detokenizer may hold back or merge
        assert r.first_token_s <= r.last_token_s and 1 <= len(r.token_gaps_s) <= 5


def answers_sweep(server, tmp_path, unguided: str, output_length: int, num_requests: int, **workload):
    """yamls/cpu-servers.yaml's vllm-serve entry as endpoint chat, responses and messages, through benchmark.py to
    the module's server (base_url: a server start less; its model is that YAML's, the tokenizer's vocabulary), and
    chat once more with guided_decoding: false (labelled `unguided`), the example chats held to `workload` (a
    json_schema or tools file). The run's console, results.csv and requests.csv rows, and manifest."""
    import csv

    import yaml

    from tests.conftest import run_benchmark

    config = yaml.safe_load((REPO / "yamls" / "cpu-servers.yaml").read_text())
    config["backends"] = [{"name": "openai", "label": f"vllm-{api}", "endpoint": api, "base_url": server.base_url,
                           "model": server.served_model} for api in ("chat", "responses", "messages")]
    config["backends"].append({**config["backends"][0], "label": unguided, "guided_decoding": False})
    config["workload"].update(prompts=str(REPO / "yamls" / "prompts" / "example-chats.jsonl"), stop_at_eos=True,
                              **workload)
    config["output_lengths"] = [output_length]
    config["stream"].update(request_rates=[8], num_requests=num_requests, num_warmup_requests=1)
    path = tmp_path / "answers.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_benchmark(path, "--output-dir", tmp_path / "out", "--no-plots")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    results = {r["backend"]: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv"))}
    assert {b: r["status"] for b, r in results.items()} == dict.fromkeys(
        ("vllm-chat", "vllm-responses", "vllm-messages", unguided), "ok")
    shares = {b: float(r["invalid_answer_share"]) for b, r in results.items()}
    assert shares == {"vllm-chat": 0, "vllm-responses": 0, "vllm-messages": 0, unguided: 1}, shares
    requests = list(csv.DictReader(open(tmp_path / "out" / "requests.csv")))
    assert {(r["backend"], r["answer_valid"]) for r in requests} == {
        ("vllm-chat", "1"), ("vllm-responses", "1"), ("vllm-messages", "1"), (unguided, "0")}
    guided = [int(r["output_tokens"]) for r in requests if r["backend"] != unguided]
    assert len(guided) == 3 * num_requests and max(guided) < output_length  # each answer ended before its budget
    assert {r["output_tokens_source"] for r in requests} == {"usage"}
    prompts: dict = {}
    for r in requests:
        prompts.setdefault(r["backend"], []).append(int(r["input_tokens"]))
    # the server counts chat's and messages' prompts alike, the Responses API's one BOS longer (docs/measurement.md)
    assert prompts["vllm-messages"] == prompts["vllm-chat"] == prompts[unguided]
    assert prompts["vllm-responses"] == [n + 1 for n in prompts["vllm-chat"]]
    return result, prompts, json.loads((tmp_path / "out" / "manifest.json").read_text())


@pytest.mark.engine
def test_answers_held_to_a_json_schema_are_checked_guided_or_not(server, tmp_path):
    """workload.json_schema: each API asked for the schema (guided decoding: every answer valid, each ending where
    its JSON does) and chat without it (random weights: no answer valid), the answers checked either way:
    requests.csv says which, results.csv the share, the console each point's."""
    result, _, _ = answers_sweep(server, tmp_path, "vllm-chat-unguided", 48, 6,
                                 json_schema=str(REPO / "yamls" / "schemas" / "yes-no.json"))
    printed = " ".join(result.stdout.split())  # the console wraps long lines
    assert "(SLO met by 100%) invalid answers 0%" in printed and "invalid answers 100%" in printed


@pytest.mark.engine
def test_answers_that_call_tools_are_checked_required_or_not(server, tmp_path):
    """workload.tools (yamls/tools/weather.json): each API asking for a call (tool_choice required / any: vLLM's
    grammar of the calls, every answer one valid call, ending with it), and chat letting the model choose (auto:
    random weights answer in text, no call, every answer invalid)."""
    _, prompts, manifest = answers_sweep(server, tmp_path, "vllm-chat-auto", 96, 5,
                                         tools=str(REPO / "yamls" / "tools" / "weather.json"))
    # tiny-llama's chat template (ChatML) has no slot for tools: the server counts the messages alone, as the harness
    # did; a tool-calling model's template renders them into the prompt, and the server's count is the one kept
    workload = manifest.get("models", [manifest])[0]["workload"]
    assert prompts["vllm-chat"][0] == workload["first_prompt_tokens"] and workload["tools"].endswith("weather.json")
    # the job's model config is a transformers object: imported once, by the preloading process, not per worker
    started = [b["runtime"]["worker_start"] for b in manifest["backends"]]
    assert "transformers" in started[0].split(" that imported ")[1].split(", ")
    assert started[1:] == ["forked from a preloading process"] * 3


@pytest.mark.engine
def test_chat_conversations_carry_the_servers_answers(server, model):
    """A multi-turn stream through /v1/chat/completions: each later turn is sent with the conversation so far, the
    server's own answers as the assistant's messages; the server counts a longer prompt every turn."""
    client = make_backend(model, base_url=server.base_url, endpoint="chat")
    client.load()
    try:
        stream = conversation_stream(model, output_length=4, num_conversations=3, turn_gap_s=0.02)
        timing = client.serve(stream)
    finally:
        client.close()
    by_index = {r.index: r for r in timing.requests}
    assert all(r.ok for r in timing.requests), [r.error for r in timing.requests]
    for r in timing.requests:
        if r.turn == 1:
            continue
        before = by_index[r.index - 1]
        sent, previous = stream.chat_messages(r.index), stream.chat_messages(r.index - 1)
        assert sent[:len(previous)] == previous and sent[-1] == stream.requests.messages[r.index][0]
        assert sent[len(previous)][0] == "assistant"  # the server's answer, as it streamed it
        assert r.input_tokens > before.input_tokens  # the server's count grows with the history


@pytest.mark.engine
def test_the_servers_own_metrics_are_scraped_while_a_stream_runs(server, model):
    assert server.runtime_info()["server_metrics"] == f"GET {server.base_url}/metrics every 0.5 s while a stream runs"
    client = make_backend(model, base_url=server.base_url, metrics_interval_s=0.02)
    client.load()
    try:
        # 64 requests of 64 tokens at once keep the server busy for ~0.5 s here: ~25 scrapes see them
        timing = client.serve(make_stream(64, 64, arrival="burst"))
    finally:
        client.close()
    assert all(r.ok for r in timing.requests)
    series = timing.server
    assert len(series.times_s) >= 3 and list(series.times_s) == sorted(series.times_s)
    assert series.times_s[0] < 0 < series.times_s[-1]  # a scrape before the first request and one after the last
    running = series.values["requests_running"]
    assert running[0] == running[-1] == 0 and max(running) >= 1  # seen while the burst ran
    assert max(series.values["kv_cache_usage"]) > 0
    figures = server_figures(series)
    assert figures["server_requests_running_max"] >= 1 and figures["server_preemptions"] == 0
    assert 0 < figures["server_kv_cache_usage_max"] <= 1


@pytest.mark.engine
def test_the_prefix_cache_is_emptied_through_vllms_development_route(server):
    """The harness started vLLM with VLLM_SERVER_DEV_MODE=1: POST /reset_prefix_cache exists and succeeds."""
    assert all(r.ok for r in server.serve(make_stream(2, 4, rate=20.0)).requests)
    server.reset_prefix_cache()  # what the runner does before each point
    assert server.prefix_cache.clean
    assert server.runtime_info()["prefix_cache_reset"] == f"POST {server.base_url}/reset_prefix_cache"


@pytest.mark.engine
def test_a_running_server_that_answers_health_with_an_error_ends_the_entry_at_once(server, model):
    """vLLM has no /v1/health: a 404 is an answer, not a server still starting: one line, no waiting."""
    client = make_backend(model, base_url=server.base_url + "/v1", health_path="/v1/health")
    start = time.monotonic()
    with pytest.raises(RuntimeError) as failure:
        client.load()
    assert time.monotonic() - start < 5
    message = str(failure.value)
    assert message.startswith(f"{server.base_url}/v1/health answered HTTP 404, not 200: ") and "\n" not in message
    assert "set health_path" in message


@pytest.mark.engine
def test_nothing_listening_is_retried_briefly_then_named(model):
    url = f"http://127.0.0.1:{free_port()}"
    client = make_backend(model, base_url=url + "/v1/", connect_timeout_s=1.5)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as failure:
        client.load()
    assert 1.5 <= time.monotonic() - start < 10
    message = str(failure.value)
    assert message.startswith(f"nothing answered {url}/health within 1.5 s (last: ") and "refused" in message
    assert "fix base_url" in message and "\n" not in message


@pytest.mark.engine
def test_never_healthy_server_is_stopped(model):
    backend = make_backend(model, command='{python} -c "import time; time.sleep(600)" {port}', startup_timeout_s=3)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as failure:
        backend.load()
    assert time.monotonic() - start < 30
    message = str(failure.value)
    assert "did not answer" in message and "within 3 s" in message and "\n" not in message
    assert not group_members(backend.server_pid)
    assert not psutil.pid_exists(backend.server_pid) or \
        psutil.Process(backend.server_pid).status() == psutil.STATUS_ZOMBIE


def test_server_that_exits_at_once(model):
    backend = make_backend(model, command='{python} -c "import sys; print(\'bad flag\'); sys.exit(3)" {port}')
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"exited with code 3 .*bad flag") as failure:
        backend.load()
    assert time.monotonic() - start < 10
    assert "\n" not in str(failure.value)
    assert not group_members(backend.server_pid)


@pytest.mark.engine
def test_server_dies_when_the_harness_dies(tmp_path):
    """PR_SET_PDEATHSIG: a worker killed with SIGKILL (no close()) leaves no server behind."""
    code = textwrap.dedent("""
        from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions, server_root
        from harness.plan.points import SweepShape
        options = OpenAIOptions(name="openai", command='{python} -c "import time; time.sleep(600)" {port}',
                                startup_timeout_s=120)
        OpenAIBackend(options, None, SweepShape(0, 8, 8, scenario="stream")).load()
    """)
    # Its temp folder (the server's log) is never cleaned up by a killed worker: keep it under tmp_path.
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        deadline = time.monotonic() + 30
        servers = []
        while not servers and time.monotonic() < deadline:
            servers = [p for p in psutil.Process(worker.pid).children() if "time.sleep(600)" in " ".join(p.cmdline())]
            time.sleep(0.1)
        assert servers, "the worker never started its server"
        worker.kill()
        worker.wait(timeout=10)
        gone, alive = psutil.wait_procs(servers, timeout=10)
        assert not alive
    finally:
        worker.kill()
        worker.wait(timeout=10)


@pytest.mark.engine
def test_close_ends_the_server_process_group(server):
    """Runs last in this module: stops the module's server the way the harness does, then checks."""
    pgid = server.server_pid
    assert group_members(pgid), "the server should be running before close()"
    server.close()
    assert not group_members(pgid)
    server.close()  # idempotent: the fixture's teardown calls it again



def test_a_batch_point_is_skipped_for_the_stream_only_engine_with_the_reason():
    """The openai backend runs streams only: a batch point is skipped by `unsupported` before anything is sent, and
    were `run` ever reached it would say so (Backend.run's default), never return a timing."""
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    options = OpenAIOptions(name="openai", base_url="http://127.0.0.1:9", model="m")
    options.validate("backend")
    assert OpenAIBackend.unsupported(options, "batch", model) == "openai runs scenario: stream only, not batch"
    assert OpenAIBackend.unsupported(options, "stream", model) is None
    backend = OpenAIBackend(options, model, SweepShape(0, 8, 8, scenario="stream"))
    with pytest.raises(NotImplementedError, match="OpenAIBackend does not run static batches"):
        backend.run(BatchSpec([[1, 2]], (2,)))

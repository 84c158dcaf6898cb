"""Trace replay without an engine: the three formats, the window and time scale, prompts of the traced lengths and
shared blocks, and every bad trace refused with one line naming the file and line (exit code 2)."""

import json
from pathlib import Path

import pytest

from app.cli import main
from harness.config.stream.traces import MOONCAKE_BLOCK_TOKENS, read_trace, windowed
from harness.errors import UserError
from tests.replay import TRACE_INPUTS, TRACE_OUTPUTS, TRACE_TIMES_S, trace_stream, write_small_trace

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "yamls" / "traces"


def test_small_azure_trace_reads_times_from_its_first_request(tmp_path):
    trace = read_trace(write_small_trace(tmp_path))
    assert trace.format == "azure"
    assert [r.time_s for r in trace.requests] == pytest.approx(TRACE_TIMES_S, abs=1e-6)
    assert [r.input_tokens for r in trace.requests] == list(TRACE_INPUTS)
    assert [r.output_tokens for r in trace.requests] == list(TRACE_OUTPUTS)
    assert [r.line for r in trace.requests] == list(range(2, 12))


@pytest.mark.parametrize("name, fmt", [("azure-sample.csv", "azure"), ("burstgpt-sample.csv", "burstgpt"),
                                       ("mooncake-sample.jsonl", "mooncake")])
def test_shipped_samples_are_detected_and_agree(name, fmt):
    trace = read_trace(SAMPLES / name)
    assert trace.format == fmt and trace.requests[0].time_s == 0
    times = [r.time_s for r in trace.requests]
    assert times == sorted(times) and trace.span_s > 5
    if fmt != "mooncake":  # the Azure and BurstGPT samples are the same requests in two formats
        other = read_trace(SAMPLES / ("burstgpt-sample.csv" if fmt == "azure" else "azure-sample.csv"))
        assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == \
            [(r.input_tokens, r.output_tokens) for r in other.requests]
        assert times == pytest.approx([r.time_s for r in other.requests], abs=1e-3)


def test_window_and_time_scale(tmp_path):
    trace = read_trace(write_small_trace(tmp_path))
    window = windowed(trace, start_s=0.3, duration_s=0.5, max_requests=None, time_scale=0.5)
    # 0.3 .. 0.8 s of trace time: the four requests at 0.300-0.315 and the one at 0.7, from the first, halved
    assert [r.time_s for r in window.requests] == pytest.approx([0, 0.0025, 0.005, 0.0075, 0.2], abs=1e-6)
    assert [r.input_tokens for r in window.requests] == [33, 21, 47, 9, 40]
    assert "5 of the trace's 10 requests (lines 5-9)" in window.note
    capped = windowed(trace, 0, None, max_requests=3, time_scale=1.0)
    assert len(capped.requests) == 3 and "max_requests cut 7" in capped.note
    assert windowed(trace, 0, None, None, 1.0).note == ""
    with pytest.raises(UserError, match=r"stream.window: no request of .* falls in it \(the trace spans 0.9 s"):
        windowed(trace, start_s=5, duration_s=None, max_requests=None, time_scale=1)


def test_stream_replays_trace_times_and_lengths(model, tmp_path):
    spec = trace_stream(model, write_small_trace(tmp_path), time_scale=2.0)
    assert spec.arrivals_s == pytest.approx([2 * t for t in TRACE_TIMES_S], abs=1e-6)
    assert spec.requests.input_tokens == TRACE_INPUTS
    assert spec.requests.max_tokens == TRACE_OUTPUTS and spec.requests.forced
    warmup = trace_stream(model, write_small_trace(tmp_path), phase="warmup")
    assert warmup.requests.input_tokens == TRACE_INPUTS[:2]  # num_warmup_requests: 2, the window's first
    assert warmup.requests.prompts[0] != spec.requests.prompts[0]  # never the timed prompt: nothing to hit in a cache


def test_mooncake_hash_ids_share_blocks(model, tmp_path):
    lines = [{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [7, 8]},
             {"timestamp": 250, "input_length": 530, "output_length": 2, "hash_ids": [7, 9]},
             {"timestamp": 500, "input_length": 100, "output_length": 3, "hash_ids": [10]}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    spec = trace_stream(model, path)
    a, b, c = spec.requests.prompts
    assert (len(a), len(b), len(c)) == (600, 530, 100)
    assert spec.arrivals_s == pytest.approx((0, 0.25, 0.5))
    block = MOONCAKE_BLOCK_TOKENS
    assert a[:block] == b[:block]  # hash id 7 in both
    assert a[block:block + 16] != b[block:block + 16]  # 8 vs 9
    assert c[:16] != a[:16]


def yaml_with(tmp_path, stream: str, extra: str = "") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text("benchmark_name: t\nmodel: {preset: tiny-llama, weights: random, dtype: fp32}\n"
                    f"scenario: stream\nbackends: [{{name: hf, device: cpu, batching: continuous}}]\n"
                    f"stream: {{{stream}}}\n{extra}")
    return path


def bad_traces(tmp_path):
    """name -> (file name, content, message after `stream.trace: PATH: `)."""
    return {
        "out of order": ("t.csv", "Timestamp,Request tokens,Response tokens\n1.0,5,5\n0.5,5,5\n",
                         "line 3: out of time order (earlier than the line before)"),
        "zero length": ("t.csv", "Timestamp,Request tokens,Response tokens\n0,5,5\n1,5,0\n",
                        "line 3: output length must be a positive integer, got '0'"),
        "length not a number": ("t.csv", "Timestamp,Request tokens,Response tokens\n0,many,5\n",
                                "line 2: input length 'many' is not a number"),
        "negative length": ("t.jsonl", '{"timestamp": 0, "input_length": -4, "output_length": 3}\n',
                            "line 1: input length must be a positive integer, got -4"),
        "missing column": ("t.csv", "TIMESTAMP,ContextTokens\n2024-01-01 00:00:00,5\n",
                           "line 1: missing column GeneratedTokens (azure format: TIMESTAMP, ContextTokens, "
                           "GeneratedTokens)"),
        "missing key": ("t.jsonl", '{"timestamp": 0, "input_length": 4}\n',
                        "line 1: missing output_length (mooncake format: timestamp in ms, input_length, "
                        "output_length, optional hash_ids)"),
        "not json": ("t.jsonl", '{"timestamp": 0,\n', "line 1: not JSON (Expecting property name enclosed in double "
                     "quotes)"),
        "unknown format": ("t.csv", "a,b,c\n1,2,3\n", "cannot tell its format from its suffix and header; set "
                           "stream.trace_format (azure, mooncake, burstgpt)"),
        "bad date": ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n",
                     "line 2: TIMESTAMP 'yesterday' is not a date-time (YYYY-MM-DD HH:MM:SS.ffff)"),
        "too few blocks": ("t.jsonl", '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1]}\n',
                           "line 1: 1 hash_ids cover 1 x 512 tokens, fewer than input_length 600"),
        "empty": ("t.jsonl", "\n", "no requests in the file"),
        "negative adapter": ("t.jsonl", '{"timestamp": 0, "input_length": 4, "output_length": 3, "adapter": -1}\n',
                             "line 1: adapter must be an integer of 0 or more (the adapter's index: lora-0, lora-1, "
                             "...), got -1"),
        "adapter as text": ("t.jsonl", '{"timestamp": 0, "input_length": 4, "output_length": 3, "adapter": "a"}\n',
                            'line 1: adapter must be a number, got "a"'),
        "fractional adapter": ("t.csv", "Timestamp,Request tokens,Response tokens,adapter\n0,5,5,1.5\n",
                               "line 2: adapter must be an integer of 0 or more (the adapter's index: lora-0, "
                               "lora-1, ...), got '1.5'"),
        "infinite adapter": ("t.csv", "Timestamp,Request tokens,Response tokens,adapter\n0,5,5,inf\n",
                             "line 2: adapter 'inf' is not a finite number"),
    }


@pytest.mark.parametrize("name", list(bad_traces(Path("/tmp"))))
def test_bad_trace_exits_2_with_one_line(tmp_path, capsys, name):
    filename, content, message = bad_traces(tmp_path)[name]
    path = tmp_path / filename
    path.write_text(content)
    assert main([str(yaml_with(tmp_path, f"arrival: trace, trace: {path}")), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: stream.trace: {path}: {message}\n"


@pytest.mark.parametrize("stream, extra, message", [
    ("arrival: trace", "", "stream.trace: required with stream.arrival: trace (a path to an Azure, Mooncake or "
     "BurstGPT trace)"),
    ("arrival: poisson, trace: x.csv", "input_lengths: [8]\noutput_lengths: [4]\n",
     "stream.trace: is read with stream.arrival: trace; set it, or remove stream.trace"),
    ("arrival: trace, trace: TRACE, time_scale: 0", "", "stream.time_scale: must be a finite number > 0, got 0"),
    ("arrival: trace, trace: TRACE, trace_format: sharegpt", "", "stream.trace_format: 'sharegpt' is not one of "
     "auto, azure, mooncake, burstgpt"),
    ("arrival: trace, trace: TRACE, window: {start_s: 60}", "", "stream.window: no request of TRACE falls in it (the "
     "trace spans 0.9 s from its first request)"),
    ("arrival: trace, trace: TRACE", "output_lengths: [4]\n", "output_lengths: stream.trace gives every request's "
     "lengths; remove output_lengths"),
    ("arrival: trace, trace: TRACE", "workload: {prompts: random, prefix: {prefix_tokens: 16}}\n",
     "workload.prefix: a trace says what its requests share (Mooncake hash_ids); remove workload.prefix or "
     "stream.arrival: trace"),
    ("arrival: trace, trace: nowhere.csv", "", "stream.trace: nowhere.csv: no such file"),
    ("arrival: poisson", "workload: {prompts: random, prefix: {prefix_tokens: 2000}}\ninput_lengths: [40]\n"
     "output_lengths: [16]\n", "workload.prefix.prefix_tokens: 2000 tokens in front of prompts of up to 40, with "
     "output 16, make 2056 tokens, over tiny-llama's max_position_embeddings (2048)"),
    ("arrival: poisson", "workload: {prompts: random, prefix: {num_prefixes: 0, prefix_tokens: 8}}\n"
     "input_lengths: [40]\noutput_lengths: [16]\n", "workload.prefix.num_prefixes: must be a positive integer, got 0"),
])
def test_bad_trace_or_prefix_config_exits_2_with_one_line(tmp_path, capsys, stream, extra, message):
    trace = str(write_small_trace(tmp_path))
    path = yaml_with(tmp_path, stream.replace("TRACE", trace), extra)
    assert main([str(path), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"error: {message.replace('TRACE', trace)}\n"


def test_trace_request_longer_than_the_model_is_named(tmp_path, capsys):
    path = tmp_path / "long.csv"
    path.write_text("Timestamp,Request tokens,Response tokens\n0,100,8\n0.5,2040,16\n")
    assert main([str(yaml_with(tmp_path, f"arrival: trace, trace: {path}")), "--dry-run"]) == 2
    assert capsys.readouterr().err == (f"error: stream.trace: {path}: line 3: 2040 + 16 tokens exceeds tiny-llama's "
                                       "max_position_embeddings (2048)\n")


def test_dry_run_plans_the_trace_window(tmp_path, capsys):
    trace = write_small_trace(tmp_path)
    path = yaml_with(tmp_path, "arrival: trace, trace: small-azure.csv, window: {max_requests: 4}")
    assert main([str(path), "--dry-run"]) == 0  # the trace path is found beside the YAML
    out = capsys.readouterr().out
    assert "small-azure.csv (azure): 4 requests" in out and "4 of the trace's 10 requests" in out
    assert trace.exists()


def test_a_traced_adapter_is_what_each_request_names_with_lora_mix_trace(model, tmp_path):
    from harness.config.engine import LoraConfig
    from harness.scenarios.adapter_mix import check_traced, with_adapters

    lines = [{"timestamp": 100 * i, "input_length": 8, "output_length": 2, "adapter": k} for i, k in
             enumerate([2, 0, 2, 1])]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    spec = trace_stream(model, path)
    assert spec.traced_adapters == (2, 0, 2, 1)
    lora = LoraConfig(adapters=3, mix="trace")
    check_traced(lora, read_trace(path), "backends[0].lora")
    assert with_adapters(spec, lora).adapters == ("lora-2", "lora-0", "lora-2", "lora-1")
    assert with_adapters(spec, LoraConfig(adapters=3)).adapters != ("lora-2", "lora-0", "lora-2", "lora-1")
    with pytest.raises(UserError, match=rf"^backends\[0\].lora.adapters: stream.trace: {path}: line 1 names adapter "
                                        r"2, and 2 are made \(lora-0 to lora-1\)$"):
        check_traced(LoraConfig(adapters=2, mix="trace"), read_trace(path), "backends[0].lora")
    path.write_text(path.read_text() + json.dumps({"timestamp": 500, "input_length": 8, "output_length": 2}) + "\n")
    read_trace.cache_clear()
    assert trace_stream(model, path).traced_adapters == ()  # not every request names one
    with pytest.raises(UserError, match=rf"^backends\[0\].lora.mix: stream.trace: {path}: line 5: no adapter"):
        check_traced(lora, read_trace(path), "backends[0].lora")
    with pytest.raises(UserError, match=r"^backends\[0\].lora.mix: trace takes each request's adapter from "
                                        r"stream.trace; set stream.arrival: trace, or mix: uniform or zipf$"):
        check_traced(lora, None, "backends[0].lora")

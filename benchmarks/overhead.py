"""Harness overhead: the latency the harness reports vs a bare `model.generate` loop, same model and shapes.

Both run in one process on the same loaded model, alternated batch by batch (and the order
flipped every round) so machine drift hits both equally. Prints the ratio of mean latencies;
the target is 1.00 +/- 0.03 (on cuda, 1.00 +/- 0.02: tests/gpu runs it there).

    python benchmarks/overhead.py [--rounds 30] [--batch-size 8] [--input-length 128] [--output-length 32]
                                  [--device cpu|cuda]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "overhead"))  # hf_batch.py, whose loop this is

from hf_batch import bare_generate_ms  # noqa: E402
from inputs import batch  # noqa: E402

from backends.hf import HFBackend, HFOptions  # noqa: E402
from harness.config.sections import ModelConfig  # noqa: E402
from harness.model.spec import resolve_model  # noqa: E402
from harness.plan.points import SweepShape  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--input-length", type=int, default=128)
    parser.add_argument("--output-length", type=int, default=32)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the model runs (default cpu)")
    args = parser.parse_args()
    tolerance = 0.02 if args.device == "cuda" else 0.03

    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    backend = HFBackend(HFOptions(name="hf", device=args.device), model, SweepShape(16, 512, 64))
    backend.load()
    harness_ms, bare_ms = [], []
    for i in range(args.rounds + 2):
        spec = batch(model, args.batch_size, args.input_length, args.output_length, i)
        pair = [lambda s=spec: backend.run(s).latency_ms,
                lambda s=spec: bare_generate_ms(backend.net, backend.eos_ids[0], s, args.device)]
        first, second = (pair if i % 2 == 0 else pair[::-1])
        a, b = first(), second()
        if i < 2:
            continue  # warm-up rounds
        h, r = (a, b) if i % 2 == 0 else (b, a)
        harness_ms.append(h)
        bare_ms.append(r)

    ratio = statistics.mean(harness_ms) / statistics.mean(bare_ms)
    print(f"tiny-llama fp32 {args.device}, batch {args.batch_size}, input {args.input_length}, "
          f"output {args.output_length}, {args.rounds} alternated rounds")
    print(f"harness mean latency {statistics.mean(harness_ms):.2f} ms (median {statistics.median(harness_ms):.2f})")
    print(f"bare generate mean   {statistics.mean(bare_ms):.2f} ms (median {statistics.median(bare_ms):.2f})")
    verdict = "ok" if abs(ratio - 1) <= tolerance else "OFF"
    print(f"ratio harness/bare   {ratio:.3f}  (target 1.00 +/- {tolerance:.2f}: {verdict})")


if __name__ == "__main__":
    main()

"""How long `--plan` takes for a 70B model on hardware this machine does not have, as a user types it.

    python benchmarks/plan_time.py [--repeats 5]

Each repeat is a fresh `python benchmark.py yamls/70b.yaml --plan hardware.gpu=h100-sxm hardware.num_gpus=8`
(interpreter start-up and imports included: that is what a user waits for). Target: under 5 s on the 2-core CI
machine. Planning reads config.json itself (harness/model/config_json.py): an import of torch or transformers on this
path alone costs 3 to 6 s here, so the script also says whether one crept in.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = [sys.executable, "benchmark.py", "yamls/70b.yaml", "--plan", "hardware.gpu=h100-sxm",
           "hardware.num_gpus=8"]
HEAVY = ("torch", "transformers", "vllm", "deepspeed", "accelerate")
TARGET_S = 5.0


def heavy_imports() -> list:
    """The heavy packages one `--plan` imports (python -X importtime lists every module on stderr)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *COMMAND[1:]], cwd=REPO, capture_output=True,
                          text=True, check=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    return sorted(names & set(HEAVY))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run(COMMAND, cwd=REPO, capture_output=True, check=True)
        seconds.append(time.perf_counter() - start)
    heavy = heavy_imports()
    print(f"--plan 70B on 8 x h100-sxm: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s over "
          f"{args.repeats} runs (target < {TARGET_S:.0f} s); heavy imports: {', '.join(heavy) or 'none'}")
    return 0 if max(seconds) < TARGET_S and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())

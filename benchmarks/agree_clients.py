"""Agreement with aiperf (`aiperf profile`, NVIDIA's client benchmark) on one vLLM server: median TTFT and TPOT.

Same server, stream shape and alternation as benchmarks/agree_serve.py (benchmarks/serve_pairs.py): ours is
`OpenAIBackend.serve` on random token-id prompts; theirs is aiperf 0.13 in a virtualenv of its own (`.venv-aiperf`,
made on first use: its pins clash with vLLM's), on synthetic prompts of the same length, the same forced output
length (`--extra-inputs ignore_eos:true min_tokens:N`, as ours sends), the same Poisson rate and count, token counts
from the server's usage (`--use-server-token-count`: a random-weight model's text does not re-tokenize to its
tokens), and the model's vocabulary cut to its tokenizer's 3747 tokens (aiperf times chunks with text only, and
random weights would otherwise pick ids that decode to none). aiperf's `inter_token_latency` is per request
(last token - first token) / (tokens - 1), our TPOT's definition; its `time_to_first_token` runs from sending, ours from the scheduled arrival, which our client meets
to within a fraction of a millisecond here.

    python benchmarks/agree_clients.py [--rate 4] [--num-requests 40] [--input-len 64] [--output-len 32]
                                       [--repeats 3] [--max-pairs 6] [--quiet-cores 0.1] [--layers 4] [--seed 0]

The target is a ratio ours/theirs within 1.00 +/- 0.05 for both medians (median over pairs of each run's median).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import serve_pairs
from serve_pairs import REPO

AIPERF_VERSION = "0.13.0"
AIPERF_VENV = REPO / ".venv-aiperf"


def aiperf_executable() -> Path:
    """aiperf in its own virtualenv, installed from the package index on first use."""
    exe = AIPERF_VENV / "bin" / "aiperf"
    if not exe.exists():
        print(f"installing aiperf {AIPERF_VERSION} into {AIPERF_VENV} (once, a few minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(AIPERF_VENV)], check=True)
        subprocess.run([str(AIPERF_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", f"aiperf=={AIPERF_VERSION}"], check=True)
    return exe


class Aiperf:
    name = "aiperf"
    tolerance = 0.05
    # aiperf's first token is the first chunk with text, and a response with none is an error ("No responses with
    # actual content"): every token must decode to some.
    text_tokens = True

    def __init__(self):
        self.exe = aiperf_executable()

    def run(self, backend, model_dir: str, args, result_dir: Path, repeat: int, others) -> dict:
        artifacts = result_dir / f"aiperf-{repeat}"
        argv = [
            str(self.exe), "profile", "--model", backend.served_model, "--url", backend.base_url,
            "--endpoint-type", "completions", "--streaming", "--tokenizer", model_dir,
            "--synthetic-input-tokens-mean", str(args.input_len), "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(args.output_len), "--output-tokens-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"min_tokens:{args.output_len}",
            "--request-rate", str(args.rate), "--request-rate-mode", "poisson",
            "--request-count", str(args.num_requests), "--random-seed", str(args.seed),
            "--use-server-token-count", "--artifact-dir", str(artifacts), "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry",
        ]
        # aiperf reads a local tokenizer folder only with HF_HUB_OFFLINE unset.
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
        others.start()
        done = subprocess.run(argv, cwd=result_dir, env=env, capture_output=True, text=True)
        others.stop()
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout)[-600:].split())
            raise SystemExit(f"aiperf failed (exit code {done.returncode}): {tail}")
        return read_export(artifacts / "profile_export_aiperf.json", args.num_requests)


def read_export(path: Path, num_requests: int) -> dict:
    """Median TTFT and inter-token latency (ms) and mean token counts from aiperf's JSON export."""
    data = json.loads(path.read_text())
    metrics = data.get("records", data)

    def stat(tag: str, name: str) -> float:
        return float(metrics[tag][name])

    completed = stat("request_count", "avg")
    if completed != num_requests:
        raise SystemExit(f"aiperf completed {completed:g} of {num_requests} requests")
    return {"ttft": stat("time_to_first_token", "p50"), "tpot": stat("inter_token_latency", "p50"),
            "input": stat("input_sequence_length", "avg"), "output": stat("output_sequence_length", "avg")}


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    serve_pairs.main(serve_pairs.parse_args(__doc__.splitlines()[0]), Aiperf())

"""What the agreement benchmarks share (benchmarks/agree_serve.py: vLLM's `vllm bench serve`; agree_clients.py:
aiperf): one vLLM OpenAI-compatible server started through the `openai` backend's own `command` path, then the
harness's client and a peer client taking turns against it in pairs, the order flipped every pair, at one
sustainable Poisson rate, until enough pairs are quiet (no busy neighbour on the machine).

A peer is an object with `name` (as printed), `tolerance` (the target: ratio ours/theirs within 1 +/- it) and
`run(backend, model_dir, args, result_dir, repeat, others) -> {"ttft", "tpot", "input", "output"}` (medians in ms,
mean token counts), which starts `others` when its timed requests start and stops it when they end; `text_tokens`
(optional): the peer times only chunks with text (see `build_backend`).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KV_CACHE_BYTES = 256 << 20
SERVER = (
    "{python} -m vllm.entrypoints.openai.api_server --model {model_dir} --load-format dummy --dtype float32 "
    "--enforce-eager --no-enable-prefix-caching --kv-cache-memory-bytes " + str(KV_CACHE_BYTES) + " "
    "--host 127.0.0.1 --port {port} --max-model-len 512 --disable-uvicorn-access-log --disable-log-stats"
)
WARMUP_REQUESTS = 10


def our_stream(model, args, phase_seed: int, count: int):
    import numpy as np

    from harness.scenarios.arrivals import arrival_times
    from harness.scenarios.batch import BatchSpec
    from harness.scenarios.stream import StreamSpec

    rng = np.random.default_rng([args.seed, phase_seed])
    special = model.special_token_ids
    allowed = np.array([t for t in range(model.hf_config.vocab_size) if t not in special])
    prompts = [allowed[rng.integers(0, len(allowed), size=args.input_len)].tolist() for _ in range(count)]
    return StreamSpec(BatchSpec(prompts, (args.output_len,) * count),
                      arrival_times("poisson", args.rate, count, args.seed))


def ours(backend, model, args, repeat: int, others: "OthersCPU") -> dict:
    """One stream through OpenAIBackend.serve: median TTFT (from the scheduled arrival) and TPOT, in ms."""
    stream = our_stream(model, args, 1 + repeat, args.num_requests)
    others.start()
    timing = backend.serve(stream)
    others.stop()
    failed = [r for r in timing.requests if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} of our requests failed; request {failed[0].index}: {failed[0].error}")
    ttfts = [(r.first_token_s - r.scheduled_s) * 1e3 for r in timing.requests]
    tpots = [(r.last_token_s - r.first_token_s) / (r.output_tokens - 1) * 1e3 for r in timing.requests
             if r.output_tokens > 1]
    return {"ttft": statistics.median(ttfts), "tpot": statistics.median(tpots),
            "input": statistics.mean(r.input_tokens for r in timing.requests),
            "output": statistics.mean(r.output_tokens for r in timing.requests)}


class OthersCPU:
    """CPU that processes outside this benchmark (not our process group, not the server's) used during a run, in
    cores: on a shared machine a busy neighbour delays the server's frontend and shows as TTFT, whoever measures."""

    def __init__(self, server_pgid: int):
        self.skip = {os.getpgid(0), server_pgid}

    def _sample(self) -> dict:
        import psutil

        times = {}
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) not in self.skip:
                    t = p.cpu_times()
                    times[p.pid] = t.user + t.system
            except (ProcessLookupError, psutil.Error):
                pass
        return times

    def start(self) -> None:
        self.before, self.start_s = self._sample(), time.monotonic()

    def stop(self) -> None:
        after = self._sample()
        used = sum(t - self.before.get(pid, 0.0) for pid, t in after.items())
        self.cores = used / (time.monotonic() - self.start_s)


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rate", type=float, default=4.0, help="Poisson requests/s (one the server sustains)")
    parser.add_argument("--num-requests", type=int, default=40)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="quiet alternated pairs wanted")
    parser.add_argument("--max-pairs", type=int, default=6, help="pairs run at most, quiet or not")
    parser.add_argument("--quiet-cores", type=float, default=0.1,
                        help="a pair is quiet when other processes used at most this many cores in both its runs")
    parser.add_argument("--layers", type=int, default=4, help="tiny-llama's num_hidden_layers")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def build_backend(args, text_tokens: bool = False):
    """The tiny model and the `openai` backend that starts its vLLM server (not started yet: see `load`).
    `text_tokens`: the model's vocabulary cut to its tokenizer's, so that every token it picks has text, for a peer
    that times only chunks with text (random weights otherwise pick ids past the tokenizer's, which decode to
    nothing)."""
    sys.path.insert(0, str(REPO))
    from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions
    from harness.config.sections import ModelConfig
    from harness.model.spec import PRESETS_DIR, resolve_model
    from harness.plan.points import SweepShape

    overrides = {"num_hidden_layers": args.layers}
    if text_tokens:
        from transformers import AutoTokenizer

        overrides["vocab_size"] = len(AutoTokenizer.from_pretrained(PRESETS_DIR / "tiny-llama"))
    model = resolve_model(ModelConfig(preset="tiny-llama", weights="random", dtype="fp32", overrides=overrides))
    options = OpenAIOptions(name="openai", command=SERVER)
    options.validate("backend")
    backend = OpenAIBackend(options, model, SweepShape(0, args.input_len, args.output_len, scenario="stream"))
    return model, backend


def main(args: argparse.Namespace, peer) -> None:
    model, backend = build_backend(args, getattr(peer, "text_tokens", False))
    print(f"{model.label} fp32 cpu, vLLM server (eager, no prefix caching); Poisson {args.rate:g} req/s, "
          f"{args.num_requests} requests, input {args.input_len}, output {args.output_len} (ignore_eos), greedy; "
          f"ours and {peer.name} alternated until {args.repeats} quiet pairs (at most {args.max_pairs})",
          flush=True)
    start_server(backend)
    try:
        backend.serve(our_stream(model, args, 0, WARMUP_REQUESTS))  # untimed: the server's first requests are slow
        pairs = run_pairs(backend, model, args, peer)
    finally:
        backend.close()
    quiet = [p for p in pairs if p["quiet"]]
    print(f"\n{len(quiet)} of {len(pairs)} pairs quiet (other processes used at most {args.quiet_cores:g} cores "
          f"during both runs)")
    if quiet:
        summarize("quiet pairs", quiet, peer)
    summarize("all pairs", pairs, peer)


def start_server(backend) -> None:
    """The backend's server started (load() stops it again if it never answers), and how long it took."""
    start = time.perf_counter()
    backend.load()
    print(f"server healthy after {time.perf_counter() - start:.1f} s at {backend.base_url}", flush=True)


def run_pairs(backend, model, args, peer) -> list:
    """Alternated pairs of runs, ours and theirs, until `--repeats` of them are quiet or `--max-pairs` have run."""
    model_dir = backend.served_model  # the {model_dir} folder: vLLM serves it under its path
    print(f"\n{'pair':>4} {'client':>7} {'ttft p50 ms':>12} {'tpot p50 ms':>12} {'in':>6} {'out':>5} "
          f"{'others cpu':>10}")
    pairs = []
    with tempfile.TemporaryDirectory(prefix="agree-") as tmp:
        for repeat in range(args.max_pairs):
            if sum(p["quiet"] for p in pairs) >= args.repeats:
                break
            pairs.append(run_pair(backend, model, model_dir, args, Path(tmp), repeat, peer))
    return pairs


def run_pair(backend, model, model_dir: str, args, result_dir: Path, repeat: int, peer) -> dict:
    """One run of each client, in an order flipped every pair; `quiet` when neither run saw busy neighbours."""
    order = ("ours", "theirs") if repeat % 2 == 0 else ("theirs", "ours")
    got, busiest = {}, 0.0
    for who in order:
        others = OthersCPU(backend.server_pid)
        got[who] = (ours(backend, model, args, repeat, others) if who == "ours"
                    else peer.run(backend, model_dir, args, result_dir, repeat, others))
        busiest = max(busiest, others.cores)
        m = got[who]
        print(f"{repeat:>4} {who:>7} {m['ttft']:>12.2f} {m['tpot']:>12.3f} {m['input']:>6.1f} "
              f"{m['output']:>5.1f} {others.cores:>10.2f}", flush=True)
    got["quiet"] = busiest <= args.quiet_cores
    return got


def summarize(title: str, pairs, peer) -> None:
    """Median over pairs of each client's per-run median, their ratio, and the range of the pairs' ratios."""
    print(f"{title}:")
    for metric, name in (("ttft", "median TTFT"), ("tpot", "median TPOT")):
        our_values = [p["ours"][metric] for p in pairs]
        their_values = [p["theirs"][metric] for p in pairs]
        ratios = [o / t for o, t in zip(our_values, their_values)]
        ratio = statistics.median(our_values) / statistics.median(their_values)
        verdict = "ok" if abs(ratio - 1) <= peer.tolerance else "OFF"
        print(f"  {name}: ours {statistics.median(our_values):.3f} ms, {peer.name} "
              f"{statistics.median(their_values):.3f} ms, ratio ours/theirs {ratio:.3f} (pairs {min(ratios):.3f}-"
              f"{max(ratios):.3f})  {verdict}")

"""The Responses and Messages APIs against the chat API on one vLLM server: median TTFT and TPOT, same prompts.

One vLLM OpenAI-compatible server (tiny-llama with `--layers` layers and its tokenizer's vocabulary, so that every
token it picks has text: the Responses and Messages APIs send an event only for a token with text; dummy weights,
fp32, eager, prefix caching off) is started through the `openai` backend's own `command` path. Three `openai`
clients send the same conversations to it (`endpoint: chat`, `responses`, `messages`), at one sustainable Poisson
rate, in rounds whose order rotates every round, so that the machine's drift falls on all three alike.

Sampled at temperature 1 with EOS allowed (`forced: false`) for all three: the Messages API has no way to ask for an
exact length, and the same rule for the three keeps their work the same. Each run gives its median TTFT (from the
scheduled arrival) and median TPOT; the figure is the median over rounds of each API's run medians, over chat's,
and the range of the rounds' ratios. Runs in which processes outside this benchmark used more than
`--quiet-cores` are reported and left out of the quiet summary (a neighbour's burst shows as TTFT, whoever sends).

    python benchmarks/agree_apis.py [--rate 4] [--num-requests 40] [--input-len 64] [--output-len 32]
                                    [--repeats 3] [--max-pairs 6] [--quiet-cores 0.1] [--layers 4] [--seed 0]

(`--max-pairs` is the most rounds run.) The target: each ratio within 1.00 +/- 0.10 (issue 53).
"""

import os
import statistics

import serve_pairs

APIS = ("chat", "responses", "messages")
TOLERANCE = 0.10


def conversations(tokenizer, args, round_seed: int):
    """`--num-requests` conversations: a system prompt and a user message of `--input-len` random tokens' text,
    with the harness's count of each under the tokenizer's chat template."""
    import numpy as np

    from harness.scenarios.arrivals import arrival_times
    from harness.scenarios.batch import BatchSpec, Sampling
    from harness.scenarios.stream import StreamSpec

    rng = np.random.default_rng([args.seed, round_seed])
    special = set(tokenizer.all_special_ids)
    allowed = [t for t in range(len(tokenizer)) if t not in special]
    convs = tuple((("system", "Answer in one line."),
                   ("user", tokenizer.decode([allowed[i] for i in rng.integers(0, len(allowed), args.input_len)])))
                  for _ in range(args.num_requests))
    prompts = [tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in conv], tokenize=True,
                                             add_generation_prompt=True)["input_ids"] for conv in convs]
    requests = BatchSpec(prompts, (args.output_len,) * len(convs), forced=False,
                         sampling=Sampling(temperature=1.0), messages=convs)
    return StreamSpec(requests, arrival_times("poisson", args.rate, len(convs), args.seed + round_seed))


def run(client, stream, server_pid: int) -> dict:
    others = serve_pairs.OthersCPU(server_pid)
    others.start()
    timing = client.serve(stream)
    others.stop()
    failed = [r for r in timing.requests if not r.ok]
    if failed:
        raise SystemExit(f"{client.options.endpoint}: {len(failed)} requests failed; request {failed[0].index}: "
                         f"{failed[0].error}")
    tpots = [(r.last_token_s - r.first_token_s) / (r.output_tokens - 1) * 1e3 for r in timing.requests
             if r.output_tokens > 1]
    return {"ttft": statistics.median((r.first_token_s - r.scheduled_s) * 1e3 for r in timing.requests),
            "tpot": statistics.median(tpots), "output": statistics.mean(r.output_tokens for r in timing.requests),
            "input": statistics.mean(r.input_tokens for r in timing.requests), "others": others.cores}


def summarize(title: str, rounds) -> None:
    print(f"{title} ({len(rounds)} rounds):")
    for metric, name in (("ttft", "median TTFT"), ("tpot", "median TPOT")):
        chat = statistics.median(r["chat"][metric] for r in rounds)
        for api in APIS[1:]:
            mine = statistics.median(r[api][metric] for r in rounds)
            ratios = [r[api][metric] / r["chat"][metric] for r in rounds]
            verdict = "ok" if abs(mine / chat - 1) <= TOLERANCE else "OFF"
            print(f"  {name}: {api} {mine:.3f} ms, chat {chat:.3f} ms, ratio {mine / chat:.3f} "
                  f"(rounds {min(ratios):.3f}-{max(ratios):.3f})  {verdict}")


def main() -> None:
    args = serve_pairs.parse_args(__doc__.splitlines()[0])
    model, server = serve_pairs.build_backend(args, text_tokens=True)  # puts the repository on sys.path
    from backends.openai_compat.backend import OpenAIBackend, OpenAIOptions

    print(f"{model.label} fp32 cpu ({args.layers} layers, vocabulary cut to the tokenizer's), vLLM server (eager, no "
          f"prefix caching); Poisson {args.rate:g} req/s, {args.num_requests} conversations, ~{args.input_len} "
          f"text tokens in, up to {args.output_len} out (temperature 1, EOS allowed); {', '.join(APIS)} rotated",
          flush=True)
    serve_pairs.start_server(server)
    clients = {}
    try:
        for api in APIS:
            options = OpenAIOptions(name="openai", base_url=server.base_url, endpoint=api)
            options.validate(api)
            clients[api] = OpenAIBackend(options, model, server.shape)
            clients[api].load()
        tokenizer = clients["chat"].client.tokenizer
        for api in APIS:  # untimed: each path's first requests are slow
            clients[api].serve(conversations(tokenizer, args, 0))
        print(f"\n{'round':>5} {'api':>9} {'ttft p50 ms':>12} {'tpot p50 ms':>12} {'in':>6} {'out':>5} "
              f"{'others cpu':>10}")
        rounds = []
        for number in range(args.max_pairs):
            if sum(r["quiet"] for r in rounds) >= args.repeats:
                break
            stream, got = conversations(tokenizer, args, 1 + number), {}
            for api in APIS[number % 3:] + APIS[:number % 3]:
                m = got[api] = run(clients[api], stream, server.server_pid)
                print(f"{number:>5} {api:>9} {m['ttft']:>12.2f} {m['tpot']:>12.3f} {m['input']:>6.1f} "
                      f"{m['output']:>5.1f} {m['others']:>10.2f}", flush=True)
            got["quiet"] = max(got[api]["others"] for api in APIS) <= args.quiet_cores
            rounds.append(got)
    finally:
        for client in clients.values():
            client.close()
        server.close()
    quiet = [r for r in rounds if r["quiet"]]
    print(f"\n{len(quiet)} of {len(rounds)} rounds quiet (other processes used at most {args.quiet_cores:g} cores)")
    if quiet:
        summarize("quiet rounds", quiet)
    summarize("all rounds", rounds)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

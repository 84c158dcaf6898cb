"""Writes the small project-written traces in yamls/traces/ (deterministic, seed 7): `python scripts/make_sample_traces.py` from
the repository root. Bursty arrivals over about 10 s; lengths a tiny model on a CPU replays in seconds."""
import datetime, json
import numpy as np
rng = np.random.default_rng(7)
n = 40
# bursty arrivals: a mix of fast and slow gaps
gaps = np.where(rng.random(n - 1) < 0.3, rng.exponential(0.05, n - 1), rng.exponential(0.4, n - 1))
times = np.concatenate([[0.0], np.cumsum(gaps)])
ins = np.clip(rng.lognormal(4.0, 0.6, n).astype(int), 8, 256)
outs = np.clip(rng.lognormal(2.8, 0.5, n).astype(int), 2, 48)
t0 = datetime.datetime(2023, 11, 16, 18, 15, 46)
with open("yamls/traces/azure-sample.csv", "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for t, i, o in zip(times, ins, outs):
        stamp = t0 + datetime.timedelta(seconds=float(t))
        f.write(f"{stamp.strftime('%Y-%m-%d %H:%M:%S')}.{stamp.microsecond:06d}0,{i},{o}\n")
with open("yamls/traces/burstgpt-sample.csv", "w") as f:
    f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
    for t, i, o in zip(times, ins, outs):
        f.write(f"{t:.3f},ChatGPT,{i},{o},{i + o},Conversation log\n")
# Mooncake: 24 requests; three shared leading blocks (a system prompt of 512 tokens each), then own blocks
next_id = 3
with open("yamls/traces/mooncake-sample.jsonl", "w") as f:
    for k in range(24):
        shared = k % 3
        own_blocks = int(rng.integers(0, 2))
        tail = int(rng.integers(16, 400))
        ids = [shared] + list(range(next_id, next_id + own_blocks + 1))
        next_id += own_blocks + 1
        length = 512 * (own_blocks + 1) + tail
        f.write(json.dumps({"timestamp": int(times[k] * 1000), "input_length": length,
                            "output_length": int(outs[k]), "hash_ids": ids}) + "\n")

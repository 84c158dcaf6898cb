"""deepspeed tp 2 batch: `DeepSpeedBackend.run` against a bare `engine.module.generate`, AutoTP over 2 CPU ranks.

Both ranks hold the backend's engine (`deepspeed.init_inference`, tp_size 2: AutoTP's sharded linears and their
all-reduces, the random weights filled per shard) and run the same pairs in the same order, as the collectives need:
`run` goes through the engine's `generate` (the `hf` backend's streamer-stamped call); the bare side is the loop a
DeepSpeed user writes, the wrapped HF model's `generate` with the same ids, greedy, min_new_tokens ==
max_new_tokens. Rank 0's times make the figures.

Run plainly, the script starts itself again as 2 ranks the way the harness launches this entry
(harness/run/launcher.py: torchrun, with the backend's `launch_env`: DS_ACCELERATOR=cpu, LOCAL_SIZE, OMP_NUM_THREADS)
and passes on only rank 0's OVERHEAD lines to stdout; everything else the ranks print goes to stderr.

    python benchmarks/overhead/deepspeed_batch.py [--pairs 30] [--batch-sizes 1 8 16] [--input-length 128]
                                                  [--output-length 32]
"""

from __future__ import annotations

import os
import subprocess
import sys

from pairs import MARK, REPO, alternate, arguments, batch_shape, emit, figure

from backends.generate.deepspeed_ranks import shm_allreduce_active
from backends.generate.deepspeed_tp import DeepSpeedBackend, DeepSpeedOptions

TP_SIZE = 2
PATH = "deepspeed tp 2 batch"
BARE = "engine.module.generate, same ids, greedy, min_new_tokens"
NOTE = "2 ranks, shm all-reduce {}; rank 0's times; each call starts on both ranks at an untimed barrier"


def entry_options() -> DeepSpeedOptions:
    return DeepSpeedOptions(name="deepspeed", device="cpu", tp_size=TP_SIZE)


def under_launcher() -> bool:
    return "RANK" in os.environ or "LOCAL_RANK" in os.environ


def launch_ranks() -> int:
    """This script again, as the entry's ranks under torchrun with the environment the harness gives them; rank 0's
    OVERHEAD lines to stdout, every other line (DeepSpeed logs to stdout, on every rank) to stderr."""
    from harness.run.process_group import free_port

    options = entry_options()
    placement = DeepSpeedBackend.resolve_placement(options)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(DeepSpeedBackend.launch_env(options, placement))
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(placement.num_ranks),
               "--master-port", str(free_port()), os.path.abspath(__file__), *sys.argv[1:]]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:
            out = sys.stdout if line.startswith(MARK) else sys.stderr
            out.write(line)
            out.flush()
    finally:
        code = proc.wait()
    return code


def measure_ranks(args) -> None:
    """Every rank loads the engine and runs every pair; rank 0 emits the figures."""
    import torch.distributed as dist
    from hf_batch import bare_generate_ms, batch

    from harness.config.sections import ModelConfig
    from harness.model.spec import resolve_model
    from harness.plan.points import SweepShape

    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    shape = SweepShape(max(args.batch_sizes), args.input_length, args.output_length)
    backend = DeepSpeedBackend(entry_options(), model, shape)
    backend.load()
    device = backend.placement.device
    lead = dist.get_rank() == 0
    # Said in the figure: "off" would mean gloo's all-reduce, not the shm kernel the harness's CPU ranks use.
    note = NOTE.format("on" if shm_allreduce_active() else "off")
    for bs in args.batch_sizes:
        def spec(i: int, bs=bs):
            return batch(backend.model, bs, args.input_length, args.output_length, i)

        # A rank still finishing its previous call would hold the other's first all-reduce: the barrier, outside
        # both timers, starts each call on both ranks together, so neither side is charged the other rank's lag.
        def harness(i: int, spec=spec) -> float:
            dist.barrier()
            return backend.run(spec(i)).latency_ms

        def bare(i: int, spec=spec) -> float:
            dist.barrier()
            return bare_generate_ms(backend.engine.module, backend.pad_id, spec(i), device)

        ours, theirs = alternate(harness, bare, args.pairs)
        if lead:
            emit(figure(PATH, BARE, batch_shape(bs, args.input_length, args.output_length), ours, theirs, note))
    backend.close()
    # As the harness's worker does: left to the interpreter's exit, gloo's threads can abort the rank.
    dist.destroy_process_group()


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    if not under_launcher():
        return launch_ranks()
    # Started under a launcher by hand: without LOCAL_SIZE (torchrun sets none) DeepSpeed's shm all-reduce segfaults.
    options = entry_options()
    for key, value in DeepSpeedBackend.launch_env(options, DeepSpeedBackend.resolve_placement(options)).items():
        os.environ.setdefault(key, value)
    measure_ranks(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

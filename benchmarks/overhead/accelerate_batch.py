"""accelerate batch: `AccelerateBackend.run` against a bare `generate` on the same `device_map`-dispatched model.

The model is the backend's: built on meta, each block of the device map materialized on its device and hooked by
accelerate's `dispatch_model` (on the CPU too, with `force_hooks`), so both sides run every block's
AlignDevicesHook. `run` is the `hf` backend's (streamer-stamped `generate`); the bare side is hf_batch.py's
`model.generate` with the same ids, greedy, min_new_tokens == max_new_tokens, called on that dispatched model.

    python benchmarks/overhead/accelerate_batch.py [--pairs 30] [--batch-sizes 1 8 16] [--input-length 128]
                                                   [--output-length 32]
"""

from __future__ import annotations

from hf_batch import measure
from pairs import arguments

from backends.generate.accelerate_pp import AccelerateBackend, AccelerateOptions
from harness.config.sections import ModelConfig
from harness.model.spec import resolve_model
from harness.plan.points import SweepShape


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    model = resolve_model(ModelConfig(preset="tiny-llama", dtype="fp32"))
    shape = SweepShape(max(args.batch_sizes), args.input_length, args.output_length)
    backend = AccelerateBackend(AccelerateOptions(name="accelerate", device="cpu"), model, shape)
    backend.load()
    # measure's bare side pads with the first EOS id; the harness pads with the config's pad id, which this
    # model lacks, so it falls back to that same id (and a forced length never pads anyway).
    assert backend.pad_id == backend.eos_ids[0], "bare and harness would pad differently"
    measure(backend, "accelerate batch", "dispatched model.generate, same ids, greedy, min_new_tokens", args,
            device=backend.placement.device)


if __name__ == "__main__":
    main()

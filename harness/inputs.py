"""Seeded random prompts: the same point, phase and batch index always get the same token ids.

Seeding per (point, phase, batch) rather than per run means a resumed sweep, a second
backend and every DeepSpeed rank see exactly the same inputs, and warm-up batches never
repeat a timed one (which would flatter any engine with a prefix cache).
"""

from __future__ import annotations

from typing import Iterable, List

import numpy as np

PHASES = {"warmup": 0, "timed": 1}


def allowed_token_ids(vocab_size: int, special_ids: Iterable[int]) -> np.ndarray:
    """The vocabulary minus BOS/EOS/PAD, which would change what the model does mid-prompt."""
    return np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.fromiter(special_ids, dtype=np.int64))


def make_prompts(
    allowed: np.ndarray, seed: int, batch_size: int, input_length: int, output_length: int, phase: str, index: int
) -> List[List[int]]:
    rng = np.random.default_rng([seed, batch_size, input_length, output_length, PHASES[phase], index])
    return allowed[rng.integers(0, len(allowed), size=(batch_size, input_length))].tolist()

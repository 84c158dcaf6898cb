"""Do engines generate the same tokens? Each point's greedy tokens vs the sweep's first backend entry.

Only meaningful where weights are identical: pretrained weights, or random weights built by
harness/weights.py in both backends. Random weights make near-ties between logits, so this
is reported as a share, not required to be 1.0. The reference tokens are kept in tokens.jsonl
so a resumed sweep still compares against them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from harness.records import PointResult, point_key
from harness.sweep import EntryPlan

Tokens = Sequence[Sequence[int]]


def identical_share(a: Tokens, b: Tokens) -> Optional[float]:
    """Share of positions where both batches hold the same token; None if the shapes differ."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
        return None
    total = sum(len(x) for x in a)
    same = sum(p == q for x, y in zip(a, b) for p, q in zip(x, y))
    return same / total if total else None


class TokenCrossCheck:
    def __init__(self, plans: Sequence[EntryPlan], model_weights: str, path: Path, greedy: bool):
        self.reference = plans[0].label
        # Sampled tokens differ between engines by design (each has its own generator): nothing to compare.
        self.greedy = greedy
        self.comparable = {p.label for p in plans
                           if greedy and (model_weights == "pretrained" or p.backend_cls.harness_random_weights)}
        self.path = path
        self.tokens: Dict[Tuple, Tokens] = self._load()

    def describe(self) -> str:
        """Why `tokens_identical_share` is filled or left empty, for the manifest."""
        if not self.greedy:
            return "off: sampling.temperature > 0, so engines draw different tokens by design"
        others = sorted(self.comparable - {self.reference})
        if self.reference not in self.comparable or not others:
            return f"off: no other entry holds the same weights as {self.reference}"
        return f"tokens of {', '.join(others)} compared with {self.reference}'s (same weights, greedy)"

    def annotate(self, result: PointResult) -> None:
        """Record the reference's tokens, or fill `tokens_identical_share` for any other comparable entry."""
        if result.token_ids is None or result.context.backend not in self.comparable:
            return
        key = point_key(result.context.backend, result.point)
        if result.context.backend == self.reference:
            self._save(key, result.token_ids)
        elif self.reference in self.comparable:
            reference = self.tokens.get(point_key(self.reference, result.point))
            if reference is not None:
                result.tokens_identical_share = identical_share(reference, result.token_ids)

    def _load(self) -> Dict[Tuple, Tokens]:
        if not self.path.exists():
            return {}
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return {tuple(r["key"]): r["token_ids"] for r in rows}

    def _save(self, key: Tuple, token_ids: Tokens) -> None:
        self.tokens[key] = token_ids
        with open(self.path, "a") as f:
            f.write(json.dumps({"key": list(key), "token_ids": [list(t) for t in token_ids]}) + "\n")
            f.flush()
            os.fsync(f.fileno())

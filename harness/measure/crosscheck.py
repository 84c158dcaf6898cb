"""Do engines generate the same tokens? Each point's greedy tokens vs a reference entry's (`TokenCrossCheck`).

Only meaningful where weights are identical: pretrained weights, or random weights built by
harness/model/weights.py in both backends, or one engine with and without speculation. Random weights make
near-ties between logits, so this is reported as a share, not required to be 1.0. The reference tokens
are kept in tokens.jsonl so a resumed sweep still compares against them.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Dict, Optional, Sequence, Tuple

from harness.files import read_file
from harness.measure.records import PointResult, point_key
from harness.plan.entry import EntryPlan

Tokens = Sequence[Sequence[int]]


def identical_share(a: Tokens, b: Tokens, eos_ids: AbstractSet[int] = frozenset()) -> Optional[float]:
    """Share of positions where both batches hold the same token; None if the shapes differ.

    Each pair of sequences is compared up to the first EOS in either: forcing a length, HF masks EOS while vLLM
    ignores it (docs/measurement.md, Output length), so past an EOS the engines continue from different tokens by
    design, not by disagreement."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
        return None
    total = same = 0
    for x, y in zip(a, b):
        for p, q in zip(x, y):
            if p in eos_ids or q in eos_ids:
                break
            total += 1
            same += p == q
    return same / total if total else None


@dataclass(frozen=True)
class TokenAgreement:
    """What the cross-check says of one point: results.csv's `tokens_identical_share` (None: the entry has no
    reference, its reference has no tokens at this point, or sampling is not greedy)."""

    tokens_identical_share: Optional[float] = None


class TokenCrossCheck:
    """Each entry is compared with one reference entry at each point.

    A speculative entry's reference is its baseline (harness/config/speculative.py: the same engine and options without
    speculation), which holds the same weights by construction: greedy speculative decoding promises unchanged
    tokens, and this checks it. Any other entry's reference is the sweep's first entry without speculation,
    where both hold the same weights (pretrained, or random weights from harness/model/weights.py). References run
    first (`plan_sweep` orders the entries so).
    """

    def __init__(self, plans: Sequence[EntryPlan], model_weights: str, path: Path, greedy: bool,
                 baselines: Dict[str, Optional[str]], eos_ids: AbstractSet[int] = frozenset()):
        plain = [p for p in plans if p.options.speculative is None]
        self.reference = (plain or list(plans))[0].label
        # Sampled tokens differ between engines by design (each has its own generator): nothing to compare.
        self.greedy = greedy
        same_weights = {p.label for p in plans if model_weights == "pretrained" or p.backend_cls.harness_random_weights
                        or getattr(p.options, "random_weights", None) == "harness"}  # vllm's option
        self.references: Dict[str, str] = {}
        for p in plans if greedy else ():
            if p.options.speculative is not None:
                baseline = baselines.get(p.label)
                if baseline:
                    self.references[p.label] = baseline
            elif p.label != self.reference and {p.label, self.reference} <= same_weights:
                self.references[p.label] = self.reference
        self.path, self.eos_ids = path, eos_ids
        self.tokens: Dict[Tuple, Tokens] = self._load()

    def describe(self) -> str:
        """Why `tokens_identical_share` is filled or left empty, for the manifest."""
        if not self.greedy:
            return "off: sampling.temperature > 0, so engines draw different tokens by design"
        if not self.references:
            return f"off: no other entry holds the same weights as {self.reference}"
        pairs = sorted(self.references.items())
        return "tokens compared (same weights, greedy): " + ", ".join(f"{a} with {b}" for a, b in pairs)

    def annotate(self, result: PointResult) -> TokenAgreement:
        """Keep a reference's tokens; an entry that has a reference gets its share of tokens identical to them."""
        label = result.context.backend
        if result.token_ids is None or not self.greedy:
            return TokenAgreement()
        if label == self.reference or label in self.references.values():  # kept for entries added on --resume too
            self._save(result.key, result.token_ids)
        if label not in self.references:
            return TokenAgreement()
        reference = self.tokens.get(point_key(result.context.model, self.references[label], result.point))
        if reference is None:
            return TokenAgreement()
        return TokenAgreement(identical_share(reference, result.token_ids, self.eos_ids))

    def _load(self) -> Dict[Tuple, Tokens]:
        """The tokens saved so far (a resumed sweep's). A line that does not parse (the partial last line a kill
        leaves, or damage) is left out and said: its point is not compared, never compared with garbage."""
        if not self.path.exists():
            return {}
        tokens: Dict[Tuple, Tokens] = {}
        for number, line in enumerate(read_file(self.path, "tokens").split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
                tokens[tuple(row["key"])] = [list(map(int, t)) for t in row["token_ids"]]
            except (ValueError, TypeError, KeyError, RecursionError):  # not UTF-8, not JSON, not a row of this file
                print(f"warning: {self.path} line {number}: damaged; left out (that point's tokens are not "
                      "compared)", file=sys.stderr)
        return tokens

    def _save(self, key: Tuple, token_ids: Tokens) -> None:
        self.tokens[key] = token_ids
        with open(self.path, "a") as f:
            f.write(json.dumps({"key": list(key), "token_ids": [list(t) for t in token_ids]}) + "\n")
            f.flush()
            os.fsync(f.fileno())

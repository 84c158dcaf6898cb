"""Shared prefixes (`workload.prefix`; docs/measurement.md, "Shared prefixes"): `num_prefixes` runs of
`prefix_tokens` tokens, one in front of every prompt, as a system prompt or few-shot header every request repeats.

The prefixes are made once, when the workload is built: cut from a text file (`text`: the user's own system prompt,
tokenized with the model's tokenizer, prefix k starting k * prefix_tokens tokens in, wrapping), else from the
workload's own source (`Workload.filler`: seeded random ids, or a prompt file's tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from harness.errors import UserError
from harness.fields import is_int, opt
from harness.files import beside_yaml, read_utf8
from harness.model.spec import ModelSpec
from harness.model.tokenizer import load_tokenizer

# What `filler` keys of a prefix start with (workloads/base.py's keys for a trace's blocks and requests follow it).
PREFIX_KEY = 0


@dataclass
class PrefixOptions:
    num_prefixes: int = opt(1, help="How many different prefixes the requests share between them.")
    prefix_tokens: int = opt(0, help="Tokens per prefix, put in front of each prompt (0: no prefix).")
    text: Optional[str] = opt(None, help="A text file the prefixes are cut from (tokenized with the model's "
                              "tokenizer); null: from the workload's own source (random ids, or the prompt file).")

    def resolve_paths(self, config_dir: Path) -> None:
        self.text = beside_yaml(config_dir, self.text)


def validate_prefix(p: PrefixOptions, replaying_trace: bool) -> None:
    if not is_int(p.prefix_tokens) or p.prefix_tokens < 0:
        raise UserError(f"workload.prefix.prefix_tokens: must be an integer of 0 or more, got {p.prefix_tokens!r}")
    if not is_int(p.num_prefixes) or p.num_prefixes < 1:
        raise UserError(f"workload.prefix.num_prefixes: must be a positive integer, got {p.num_prefixes!r}")
    if p.text is not None and not p.prefix_tokens:
        raise UserError("workload.prefix.text: the prefixes are cut from it to prefix_tokens each; set prefix_tokens")
    if p.num_prefixes != 1 and not p.prefix_tokens:
        raise UserError("workload.prefix.num_prefixes: counts the prefixes of prefix_tokens each; set prefix_tokens, "
                        "or remove num_prefixes")
    if p.text is not None and not Path(p.text).is_file():
        raise UserError(f"workload.prefix.text: {p.text}: no such file")
    if p.prefix_tokens and replaying_trace:
        raise UserError("workload.prefix: a trace says what its requests share (Mooncake hash_ids); remove "
                        "workload.prefix or stream.arrival: trace")


def make_prefixes(p: PrefixOptions, filler: Callable[[Tuple[int, ...], int], List[int]],
                  model: ModelSpec) -> List[List[int]]:
    """Every prefix's ids, in order (none without prefix_tokens)."""
    if not p.prefix_tokens:
        return []
    if p.text is None:
        return [filler((PREFIX_KEY, k), p.prefix_tokens) for k in range(p.num_prefixes)]
    text = read_utf8(Path(p.text), "prefix text")
    ids = list(load_tokenizer(model)(text, add_special_tokens=False)["input_ids"])
    if len(ids) < p.prefix_tokens:
        raise UserError(f"workload.prefix.text: {p.text} has {len(ids)} tokens, fewer than prefix_tokens "
                        f"({p.prefix_tokens})")
    return [[ids[(k * p.prefix_tokens + i) % len(ids)] for i in range(p.prefix_tokens)] for k in range(p.num_prefixes)]

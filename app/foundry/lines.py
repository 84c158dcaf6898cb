"""The mapping lines of a translation: one per llm-foundry key, saying where it went or why it was dropped; and
the checks shared by every section (a value honoured only as the one thing this harness builds)."""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

from harness.errors import UserError

WEIGHT_INIT = "weight initialisation: the harness draws its own random weights (timings do not depend on them)"
DROPOUT = "dropout, off at inference"
TRAINING_ONLY = "training-side setting of llm-foundry's model builder; generation does not use it"
TOKENIZER = ("prompts are random token ids (as llm-foundry's benchmark draws them), so no tokenizer is loaded and "
             "no hub id needed; set model.tokenizer only for a prompt file")
INIT_DEVICE = "where llm-foundry's builder first puts the weights; each engine here builds and places its own"
MODEL_USE_CACHE = "the model's generation default; the top-level use_cache is what generate is given"


class MappingLines(list):
    """The mapping lines, one per key: where it went, or why it was dropped."""

    def mapped(self, key: str, value: Any, target: str, new_value: Any = ..., why: str = "") -> None:
        shown = "" if new_value is ... else f": {show(new_value)}"
        self.append(f"{key}: {show(value)} -> {target}{shown}" + (f" ({why})" if why else ""))

    def dropped(self, key: str, value: Any, why: str) -> None:
        self.append(f"{key}: {show(value)} -> dropped: {why}")

    def known(self, path: str, key: str, value: Any, dropped: Dict[str, str],
              fixed_values: Dict[str, Tuple[Any, str]]) -> bool:
        """A key dropped with its reason (`dropped`), or one honoured only at the one value built (`fixed_values`:
        key -> (that value, why)); False when neither table knows it."""
        if key in dropped:
            self.dropped(path, value, dropped[key])
        elif key in fixed_values:
            fixed(path, value, *fixed_values[key], self)
        else:
            return False
        return True


def fixed(path: str, value: Any, only: Any, why: str, lines: MappingLines) -> None:
    if value != only:
        raise UserError(f"{path}: {show(value)} cannot be honoured: {why} (allowed: {show(only)})")
    lines.dropped(path, value, why)


def choice(path: str, value: Any, allowed: Tuple[str, ...], why: str, lines: MappingLines) -> None:
    if value not in allowed:
        raise UserError(f"{path}: {show(value)} cannot be honoured: {why} (allowed: {', '.join(allowed)})")
    lines.dropped(path, value, why)


def show(value: Any) -> str:
    """A value as YAML writes it inline, on one line (the mapping lines are YAML comments)."""
    if isinstance(value, str):
        return value
    return json.dumps(value).replace('"', "")

"""Speculative decoding as a property of a backend entry: its `speculative` section, the draft model it names,
and which entry of the sweep is its baseline (the same engine without speculation).

A backend maps the section to its engine's own mechanism (backends/generate/assisted.py: transformers' assisted
generation; backends/vllm_engine/speculative.py: `speculative_config`) and reports the engine's counters as `timing.SpecCounts`; the
definitions of every figure are in docs/measurement.md, "Speculative decoding".
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from harness.config.loading import to_dataclass
from harness.errors import UserError
from harness.fields import opt

# ngram and prompt_lookup are one method under two names: each proposes the tokens that followed the last
# occurrence of the sequence's latest n-gram in its own prompt and output (vLLM calls it ngram, HF prompt lookup).
METHODS = ("ngram", "prompt_lookup", "draft", "eagle")
LOOKUP_METHODS = ("ngram", "prompt_lookup")


@dataclass
class DraftConfig:
    """The model that proposes tokens (method: draft or eagle). Exactly one of the three keys."""

    preset: Optional[str] = opt(None, help="Architecture shipped in harness/presets/ (random weights only).")
    name_or_path: Optional[str] = opt(None, help="Local model folder or hub id of the draft (or EAGLE head).")
    layers_of_target: Optional[int] = opt(
        None, help="Build the draft from the target's own first layers and its head: the same weights, so "
        "acceptance is real without a download (random or pretrained target weights)."
    )


@dataclass
class SpeculativeConfig:
    method: str = opt(help="ngram | prompt_lookup (one method, two names: n-gram lookup in the sequence itself) | "
                      "draft (a smaller model) | eagle (a trained EAGLE head; vllm, pretrained weights).")
    num_speculative_tokens: int = opt(help="Tokens proposed per step (k), verified in one target forward pass.")
    prompt_lookup_max: int = opt(4, help="ngram / prompt_lookup: longest n-gram matched.")
    prompt_lookup_min: int = opt(1, help="ngram / prompt_lookup: shortest n-gram matched (transformers: 1 only).")
    draft: Optional[DraftConfig] = opt(None, help="method: draft or eagle: which model proposes.")

    def validate(self, key: str) -> None:
        if self.method not in METHODS:
            raise UserError(f"{key}.method: {self.method!r} is not one of {', '.join(METHODS)}")
        k = self.num_speculative_tokens
        if k < 1:
            raise UserError(f"{key}.num_speculative_tokens: must be at least 1, got {k}")
        if self.method in LOOKUP_METHODS:
            if self.draft is not None:
                raise UserError(f"{key}.draft: method {self.method} proposes from the sequence itself, no draft "
                                "model; remove draft or use method: draft")
            if self.prompt_lookup_min < 1:
                raise UserError(f"{key}.prompt_lookup_min: must be at least 1, got {self.prompt_lookup_min}")
            if self.prompt_lookup_max < self.prompt_lookup_min:
                raise UserError(f"{key}.prompt_lookup_max: must be at least prompt_lookup_min "
                                f"({self.prompt_lookup_min}), got {self.prompt_lookup_max}")
            return
        draft = self.draft
        given = [] if draft is None else [f for f in ("preset", "name_or_path", "layers_of_target")
                                          if getattr(draft, f) is not None]
        if draft is None or len(given) != 1:  # no draft: none given
            raise UserError(f"{key}.draft: method {self.method} needs exactly one of draft.preset, draft.name_or_path, "
                            f"draft.layers_of_target, got {', '.join(given) or 'none'}")
        if self.method == "eagle" and given != ["name_or_path"]:
            raise UserError(f"{key}.draft: method eagle needs draft.name_or_path, a trained EAGLE head for the target")
        if draft.layers_of_target is not None and draft.layers_of_target < 1:
            raise UserError(f"{key}.draft.layers_of_target: must be at least 1, got {draft.layers_of_target}")

    @property
    def tag(self) -> str:
        """`ngram4`, `draft5`: what an entry expanded from a `speculative` list appends to its label."""
        return f"{self.method}{self.num_speculative_tokens}"

    @property
    def lookup(self) -> bool:
        return self.method in LOOKUP_METHODS


def expand_entries(raw_entries: List[Any]) -> List[Tuple[str, str, Any]]:
    """(YAML key of the entry, of its `speculative` section, raw entry) per backend entry, an entry whose
    `speculative` is a list becoming one entry per item: `null` is the entry without speculation, keeping its
    label; any other item appends its tag (`vllm-ngram4`). Items are checked here, where their keys are known
    (`backends[1].speculative[0]`)."""
    out: List[Tuple[str, str, Any]] = []
    for i, entry in enumerate(raw_entries):
        key = f"backends[{i}]"
        items = entry.get("speculative") if isinstance(entry, dict) else None
        if not isinstance(items, list):
            out.append((key, f"{key}.speculative", entry))
            continue
        if not items:
            raise UserError(f"{key}.speculative: an empty list; give settings, or null for none")
        base_label = entry.get("label") or entry.get("name")
        if items.count(None) > 1:
            raise UserError(f"{key}.speculative: null (the entry without speculation) is listed {items.count(None)} "
                            "times; list it once")
        for j, item in enumerate(items):
            expanded = copy.deepcopy(entry)
            expanded["speculative"] = item
            if item is not None:
                expanded["label"] = f"{base_label}-{parse(item, f'{key}.speculative[{j}]').tag}"
            out.append((key, f"{key}.speculative[{j}]", expanded))
    return out


def parse(raw: Any, key: str) -> SpeculativeConfig:
    spec = to_dataclass(SpeculativeConfig, raw, key)
    spec.validate(key)
    return spec


def baselines(entries: Sequence[Any]) -> Dict[str, Optional[str]]:
    """Each speculative entry's baseline: the first entry of the same engine without `speculative` whose other
    options are all equal (label aside), else None. Keyed by label."""
    def settings(options) -> dict:
        return {k: v for k, v in dataclasses.asdict(options).items() if k not in ("label", "speculative")}

    out = {}
    for entry in entries:
        if entry.speculative is None:
            continue
        match = next((e for e in entries if e.speculative is None and settings(e) == settings(entry)), None)
        out[entry.entry_label] = match.entry_label if match is not None else None
    return out

"""vLLM's speculative decoding for a `vllm` entry with `speculative`: its `speculative_config`, and its spec-decode
counters (docs/measurement.md, "Speculative decoding")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from harness.config.speculative import SpeculativeConfig
from harness.model.drafts import draft_model
from harness.model.spec import ModelSpec
from harness.scenarios.batch import SpecCounts

# vLLM's spec-decode counters (Prometheus, in this process) -> SpecCounts fields.
SPEC_COUNTERS = {"vllm:spec_decode_num_drafts": "draft_steps", "vllm:spec_decode_num_draft_tokens": "proposed",
                 "vllm:spec_decode_num_accepted_tokens": "accepted"}
# vLLM's name for each speculative.method.
SPEC_METHODS = {"ngram": "ngram", "prompt_lookup": "ngram", "draft": "draft_model", "eagle": "eagle"}


def speculative_config(spec: SpeculativeConfig, target: ModelSpec, folder: Optional[Path]) -> Dict[str, Any]:
    """vLLM's `speculative_config` for the entry's section. A random-weight draft is a config folder (written under
    `folder`) loaded with dummy weights like the target's: vLLM fills every parameter from one seed, so the first
    layers of the target and a `layers_of_target` draft hold the same values. `folder` is None only for a pretrained
    target, whose draft is never random."""
    config: Dict[str, Any] = {"method": SPEC_METHODS[spec.method], "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.lookup:
        config.update(prompt_lookup_max=spec.prompt_lookup_max, prompt_lookup_min=spec.prompt_lookup_min)
    elif spec.method == "eagle":
        assert spec.draft is not None  # method eagle: SpeculativeConfig.validate requires draft.name_or_path
        config["model"] = spec.draft.name_or_path
    else:
        draft = draft_model(spec, target)
        if draft.weights == "random":
            assert folder is not None  # a random draft's target is random too (draft_model), and its folder given
            config["model"] = str(draft.write_config_folder(folder / "draft"))
        else:
            config["model"] = draft.source
    return config


def spec_totals() -> SpecCounts:
    """vLLM's spec-decode counters so far (the frontend's Prometheus registry, summed over engines)."""
    from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

    totals = dict.fromkeys(SPEC_COUNTERS.values(), 0)
    for metric in get_metrics_snapshot():
        if metric.name in SPEC_COUNTERS:
            assert isinstance(metric, Counter)  # vLLM counts them as Prometheus counters (v1/spec_decode/metrics.py)
            totals[SPEC_COUNTERS[metric.name]] += int(metric.value)
    return SpecCounts(**totals)

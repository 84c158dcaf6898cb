"""transformers' assisted generation for an `hf` entry with `speculative`: the draft model (or prompt lookup), what
`generate` is given, and the counters (docs/measurement.md, "Speculative decoding")."""

from __future__ import annotations

from typing import Dict, List, Optional

from harness.config.speculative import SpeculativeConfig
from harness.model import weights
from harness.model.drafts import draft_model
from harness.model.spec import ModelSpec, architecture
from harness.scenarios.batch import SpecCounts


class TargetPasses:
    """Counts the target model's forward passes in assisted generation, and the positions each one runs.

    A verifying pass runs the tokens not yet in the KV cache: the last emitted token plus the k proposed ones
    (the first pass: the whole prompt plus them). It emits the accepted proposals plus one token of its own,
    so over a sequence accepted = emitted - passes.
    """

    def __init__(self, net):
        self.positions: List[int] = []
        net.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids")
        self.positions.append((ids if ids is not None else args[0]).shape[-1])

    def counts(self, prompt_tokens: int, emitted: int) -> SpecCounts:
        proposed = [self.positions[0] - prompt_tokens] + [n - 1 for n in self.positions[1:]]
        return SpecCounts(draft_steps=sum(c > 0 for c in proposed), proposed=sum(proposed),
                          accepted=emitted - len(self.positions))


class AssistedGeneration:
    """Built once the target is loaded: the draft on the target's device, and the pass counter on the target."""

    def __init__(self, spec: SpeculativeConfig, target_net, target: ModelSpec, device: str, build_kwargs: dict):
        self.spec = spec
        self.draft = load_draft(spec, target, device, build_kwargs) if spec.method == "draft" else None
        self._passes = TargetPasses(target_net)

    @staticmethod
    def config_fields(spec: Optional[SpeculativeConfig]) -> Dict[str, int]:
        """GenerationConfig fields of prompt lookup (none for a draft, whose k lives on the draft's own config)."""
        if spec is None or not spec.lookup:
            return {}
        return dict(prompt_lookup_num_tokens=spec.num_speculative_tokens, max_matching_ngram_size=spec.prompt_lookup_max)

    def generate_kwargs(self) -> Dict[str, object]:
        """What `generate` gets besides its config; a new batch's count starts here."""
        self._passes.positions.clear()
        return {"assistant_model": self.draft} if self.draft is not None else {}

    def counts(self, prompt_tokens: int, emitted: int) -> SpecCounts:
        return self._passes.counts(prompt_tokens, emitted)

    def describe(self) -> Dict[str, object]:
        return {"method": self.spec.method, "num_speculative_tokens": self.spec.num_speculative_tokens,
                "draft_architecture": architecture(self.draft.config) if self.draft is not None else None}


def load_draft(spec: SpeculativeConfig, target: ModelSpec, device: str, build_kwargs: dict):
    """The draft model, built like the target; it proposes exactly k tokens per step (a constant schedule and no
    confidence cut-off, which transformers otherwise applies), as vLLM's draft does."""
    from transformers import AutoModelForCausalLM

    draft = draft_model(spec, target)
    if draft.weights == "random":  # harness.model.weights seeds by name: the target's first layers, where shapes match
        net = weights.build_empty(draft.hf_config, **build_kwargs)
        weights.materialize(net, device, init_range=weights.init_range_of(draft.hf_config))
    else:  # the draft's checkpoint; for layers_of_target the target's, read as far as the fewer layers go
        net = AutoModelForCausalLM.from_pretrained(draft.source, config=draft.hf_config, device_map=device,
                                                   **build_kwargs)
    config = net.generation_config
    config.num_assistant_tokens = spec.num_speculative_tokens
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    return net.eval().requires_grad_(False)

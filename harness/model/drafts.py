"""The draft model a `speculative` section names (method: draft), resolved against the target: a ModelSpec, config
only, nothing loaded. The section itself is harness/config/speculative.py's.
"""

from __future__ import annotations

from harness.config.speculative import SpeculativeConfig
from harness.config.sweep import SweepConfig, spec_key
from harness.errors import UserError


def draft_model(spec: SpeculativeConfig, target, key: str = "speculative"):
    """The draft as a ModelSpec (config only, nothing loaded), with the target's dtype and weights kind.

    Raises UserError at `key` when the draft cannot serve the target: another vocabulary (a draft proposes
    token ids the target verifies), a preset draft of a pretrained target (presets have no weights), or
    `layers_of_target` not fewer than the target's layers.
    """
    from harness.config.sections import ModelConfig
    from harness.model.spec import ModelSpec, count_parameters, resolve_model, view_of, with_fewer_layers

    draft = spec.draft
    assert draft is not None  # method draft: SpeculativeConfig.validate requires the draft section
    if draft.layers_of_target is not None:
        layers = target.config.num_hidden_layers
        if draft.layers_of_target >= layers:
            raise UserError(f"{key}.draft.layers_of_target: must be fewer than the target's {layers} layers, got "
                            f"{draft.layers_of_target}")
        hf_config = with_fewer_layers(target.hf_config, draft.layers_of_target)
        return ModelSpec(f"{target.name} (first {draft.layers_of_target} layers)", target.source, target.weights,
                         target.dtype, view_of(hf_config), count_parameters(hf_config), built_hf_config=hf_config)
    if draft.preset is not None and target.weights == "pretrained":
        raise UserError(f"{key}.draft.preset: a preset has no weights, and the target's are pretrained; give "
                        "draft.name_or_path (or draft.layers_of_target)")
    try:
        model = resolve_model(ModelConfig(preset=draft.preset, name_or_path=draft.name_or_path,
                                          weights=target.weights, dtype=target.dtype))
    except UserError as e:  # its message names model.* (say where the draft is instead) or its config.json
        message = str(e)
        said = f"{key}.draft{message[len('model'):]}" if message.startswith("model") else f"{key}.draft: {message}"
        raise UserError(said) from None
    ours, theirs = model.config.vocab_size, target.config.vocab_size
    if ours != theirs:
        raise UserError(f"{key}.draft: its vocabulary has {ours} tokens, the target's {theirs}; a draft must share "
                        "the target's tokenizer")
    return model


def check_drafts(config: SweepConfig, target) -> None:
    """Every draft of the sweep resolves against the target (see `draft_model`), before anything is planned."""
    for i, entry in enumerate(config.backends):
        spec = entry.speculative
        if spec is not None and spec.method == "draft":
            draft_model(spec, target, spec_key(config, i))

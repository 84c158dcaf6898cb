"""Resolve the `model` section into a ModelSpec: the architecture, its sizes, where it comes from.

Nothing here loads weights. A local config.json of a family harness/model/config_json.py knows is read and counted
there, without transformers; anything else gets transformers' config, and its parameters are counted by building
the model on the meta device, which is exact for every architecture (MoE included) and allocates nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional, Set, Tuple

from harness.config.sections import ModelConfig
from harness.errors import UserError, did_you_mean, known_names
from harness.model.config_check import TOKEN_IDS, check_config, check_sizes, check_token_ids, read_config_json
from harness.model import config_json as config_view
from harness.model.config_json import ConfigView
from harness.model.quantized import Quantized, bytes_per_weight, dequantize_bytes_per_weight, weights_bytes

PRESETS_DIR = Path(__file__).parent.parent / "presets"
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# A limit no request reaches: fit checks compare lengths with max_positions and need a number.
UNBOUNDED_POSITIONS = 2**31 - 1


def preset_names() -> List[str]:
    return sorted(p.name for p in PRESETS_DIR.iterdir() if (p / "config.json").is_file())


# Short names for the architecture fields users change most, as the `model` column shows them.
OVERRIDE_WORDING = {
    "num_hidden_layers": "{} layers", "hidden_size": "hidden {}", "intermediate_size": "ffn {}",
    "num_attention_heads": "{} heads", "num_key_value_heads": "{} KV heads", "head_dim": "head dim {}",
    "vocab_size": "vocab {}", "max_position_embeddings": "max positions {}", "num_local_experts": "{} experts",
    "num_experts_per_tok": "top-{} experts", "num_experts": "{} experts", "moe_intermediate_size": "expert ffn {}",
    "d_model": "hidden {}", "n_heads": "{} heads", "n_layers": "{} layers", "expansion_ratio": "ffn x{}",
    "max_seq_len": "max positions {}",
}


@dataclass
class ModelSpec:
    """A model as the harness sees it. `config` (torch-free, what planning reads) and `hf_config` (transformers',
    what engines build from, made on first use) both carry the YAML's overrides.

    `name` is the preset or path; `changes` the overrides that changed a field of it, so that a
    modified preset is never reported under the preset's bare name (see `label`).
    """

    name: str
    source: str
    weights: str
    dtype: str
    config: ConfigView
    num_params: int
    changes: Dict[str, Any] = field(default_factory=dict)
    built_hf_config: Optional[Any] = field(default=None, repr=False)
    section: Optional[ModelConfig] = field(default=None, repr=False)  # the YAML's model section it resolves
    key: str = "model"  # where that section is in the YAML (`models[1]`), for messages
    quantized: Optional[Quantized] = None  # the linear layers as an entry loads them (`loaded_as`)

    @property
    def hf_config(self):
        if self.built_hf_config is None:  # read fast; only a source with no overrides gets here
            self.built_hf_config = _load_hf_config(self.source)
        return self.built_hf_config

    @property
    def label(self) -> str:
        """The `model` column: the section's `label`, else `llama-2-7b`, or `llama-2-7b (modified: 4 layers,
        hidden 256)`."""
        if self.section is not None and self.section.label:
            return self.section.label
        if not self.changes:
            return self.name
        words = [OVERRIDE_WORDING.get(k, k + " {}").format(_compact(v)) for k, v in self.changes.items()]
        return f"{self.name} (modified: {', '.join(words)})"

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, TORCH_DTYPES[self.dtype])

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def weights_bytes(self) -> float:
        """The weights as loaded, quantized or not (harness/model/quantized.py)."""
        c = getattr(self.config, "text_config", None) or self.config
        return weights_bytes(self.num_params, c.vocab_size * c.hidden_size,
                             bool(getattr(c, "tie_word_embeddings", False)), self.dtype_bytes, self.quantized)

    def loaded_as(self, quantization: str, device: str) -> "ModelSpec":
        """The model as an entry with `quantization` loads it on `device`: what its plan, estimates and roofline use."""
        if quantization == "none":
            return dataclasses.replace(self, quantized=None) if self.quantized else self
        per_weight = bytes_per_weight(quantization, device, self.dtype_bytes)
        transient = dequantize_bytes_per_weight(quantization, device, self.dtype_bytes)
        return dataclasses.replace(self, quantized=Quantized(quantization, per_weight, transient))

    @property
    def takes_images(self) -> bool:
        """An image-text model (LLaVA-NeXT): a vision tower beside the language model, built by transformers'
        AutoModelForImageTextToText (`model_class`), served with images by an openai entry."""
        return getattr(self.config, "vision_config", None) is not None

    @property
    def max_positions(self) -> int:
        """The longest sequence the model takes; UNBOUNDED_POSITIONS for ALiBi models (BLOOM), which have no
        position table to run past (their config states no max_position_embeddings)."""
        c = getattr(self.config, "text_config", None) or self.config
        value = getattr(c, "max_position_embeddings", None)
        return UNBOUNDED_POSITIONS if value is None else int(value)

    @property
    def special_token_ids(self) -> FrozenSet[int]:
        """Token ids a random prompt must avoid: a stray EOS or BOS changes what the model does, and an image-text
        model's image token without its image is refused."""
        text = getattr(self.config, "text_config", None) or self.config
        ids: Set[int] = set()
        for source, key in ((self.config, "image_token_index"), (text, "bos_token_id"), (text, "eos_token_id"),
                            (text, "pad_token_id")):
            value = getattr(source, key, None)
            ids.update(value if isinstance(value, list) else [value] if value is not None else [])
        return frozenset(ids)

    @property
    def eos_token_ids(self) -> FrozenSet[int]:
        value = getattr(getattr(self.config, "text_config", None) or self.config, "eos_token_id", None)
        return frozenset(value if isinstance(value, list) else [value] if value is not None else [])

    def write_config_folder(self, folder: Path) -> Path:
        """Write the resolved config.json (overrides applied) for engines that load from a folder."""
        folder.mkdir(parents=True, exist_ok=True)
        self.hf_config.save_pretrained(folder)
        return folder


def resolve_models(sections: List[Tuple[str, ModelConfig]]) -> List[ModelSpec]:
    """Every model section of the sweep (`config.model_sections`), each under a label of its own: the label is
    what tells their rows apart (the `model` column, resume)."""
    models: List[ModelSpec] = []
    seen: Dict[str, str] = {}  # label -> the key of the section that has it
    for key, section in sections:
        model = resolve_model(section, key)
        if model.label in seen:
            raise UserError(f"{key}.label: {model.label!r} is already the model of {seen[model.label]}; give each "
                            "model a unique label")
        seen[model.label] = key
        models.append(model)
    return models


def resolve_model(config: ModelConfig, key: str = "model") -> ModelSpec:
    """`key` is where the section is in the YAML (`model`, `models[1]`), for messages."""
    model = _resolve(config, key)
    model.section, model.key = config, key
    return model


def _resolve(config: ModelConfig, key: str) -> ModelSpec:
    if config.preset:
        known = preset_names()
        if config.preset not in known:
            raise UserError(f"{key}.preset: unknown preset {config.preset!r}{known_names(config.preset, known)}")
        source, name = str(PRESETS_DIR / config.preset), config.preset
    else:
        # validate_model (a draft's: SpeculativeConfig.validate) requires a preset or a name_or_path
        assert config.name_or_path is not None
        source = name = config.name_or_path
    if Path(source).expanduser().is_dir():  # a model folder (a preset's too): its config.json checked as it is read
        read_config_json(source, key)
    elif source.startswith((".", "/", "~")):
        raise UserError(f"{key}.name_or_path: no such folder {source!r}")
    view = None if config.overrides else config_view.read_local(source)
    if view is not None:
        return ModelSpec(name, source, config.weights, config.dtype, view, config_view.count_parameters(view))
    preset_config = _load_hf_config(source, key)
    hf_config = _with_overrides(preset_config, source, config.overrides, key)
    _check_built(hf_config, config.overrides, key)
    changes = {k: v for k, v in config.overrides.items() if getattr(preset_config, k) != getattr(hf_config, k)}
    view = view_of(hf_config)
    _check_sizable(view, source, key)  # before counting: building an unsizable model fails in transformers' words
    try:
        num_params = count_parameters(hf_config)
    except ValueError as e:  # no Auto class builds it (an encoder, CLIP alone)
        raise UserError(f"{key}.name_or_path: transformers builds no causal LM or image-text model from {source!r} "
                        f"(model_type {hf_config.model_type}: {_first_line(e)})") from None
    except Exception as e:  # the model's own code refuses a field (a rope type it does not know, say)
        where = f"{key}.overrides" if config.overrides else f"{key}.name_or_path"
        raise UserError(f"{where}: transformers cannot build model_type {hf_config.model_type} from it "
                        f"({type(e).__name__}: {_first_line(e)})") from None
    return ModelSpec(name, source, config.weights, config.dtype, view, num_params, changes, hf_config)


def _check_sizable(view: ConfigView, source: str, key: str) -> None:
    """Refuse, in one line, a config whose sizes planning cannot read: the estimate, the roofline and the labels
    all need them, and a model planned from guessed sizes would be reported as measured."""
    missing = config_view.missing_planned(view)
    if missing is not None:
        model_type = getattr(view, "model_type", None) or "unknown"
        raise UserError(f"{key}: cannot size {source!r} (model_type {model_type}): its config.json has no "
                        f"{missing}, nor a field transformers maps to it; planning needs "
                        f"{', '.join(config_view.PLANNED)}")


def view_of(hf_config) -> ConfigView:
    """transformers' config as planning reads it: its fields, and planning's names for those its class names
    otherwise (attribute_map: an MPT's d_model is its hidden_size; see harness/model/config_json.py)."""
    mapped = {name: getattr(hf_config, name, None) for name in getattr(type(hf_config), "attribute_map", {})}
    return ConfigView(hf_config.to_dict(), mapped)


def _check_built(hf_config, overrides: dict, key: str) -> None:
    """Refuse a config that transformers would build otherwise than it states (config_view.NOT_BUILT): every
    engine, the plan and the labels would describe a model nobody measured."""
    problem = config_view.not_built(hf_config.to_dict())
    if problem is None:
        return
    path, value, built, why = problem
    where = f"{key}.overrides.{path}" if path.split(".")[0] in overrides else f"{key}: {path}"
    raise UserError(f"{where}: {value!r} is not what transformers builds for model_type {hf_config.model_type} "
                    f"({why}); it builds {built!r}")


def architecture(config) -> Dict[str, Any]:
    """The shape fields that decide compute and KV-cache size, as an engine builds them.

    Engines report theirs in the manifest (`backends[].runtime.architecture`), so two engines given
    the same YAML can be checked to have measured the same model.
    """
    c = getattr(config, "text_config", None) or config
    c = c if isinstance(c, ConfigView) else view_of(c)  # planning's names, whatever the family calls them
    return {"num_hidden_layers": c.num_hidden_layers, "hidden_size": c.hidden_size,
            "intermediate_size": getattr(c, "intermediate_size", None), "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim, "vocab_size": c.vocab_size}


def _load_hf_config(source: str, key: str = "model"):
    from transformers import AutoConfig

    if source.startswith((".", "/", "~")) and not Path(source).expanduser().is_dir():
        raise UserError(f"{key}.name_or_path: no such folder {source!r}")

    try:
        return AutoConfig.from_pretrained(source)
    except Exception as e:  # transformers raises OSError, ValueError or hub errors here
        raise UserError(f"{key}.name_or_path: cannot load a config from {source!r} ({_first_line(e)})") from None


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _with_overrides(preset_config, source: str, overrides: dict, key: str):
    """The config rebuilt from the source's own fields plus the overrides, as if both were one config.json.

    Setting attributes on a built config would leave what its constructor derived (head_dim from
    hidden_size / heads, rope defaults, layer-type lists) computed from the preset's values; building
    it again recomputes them, unless an override sets such a field itself.
    """
    if not overrides:
        return preset_config
    check_sizes(overrides, lambda name: f"{key}.overrides.{name}")
    for name in ("model_type", "architectures"):
        if name in overrides:
            raise UserError(f"{key}.overrides.{name}: a model's family is its own, not an override; point "
                            f"{key}.name_or_path (or preset) at a model of that family")
    for name in ("torch_dtype", "dtype"):
        if name in overrides:
            raise UserError(f"{key}.overrides.{name}: the sweep's dtype is {key}.dtype (bf16, fp16 or fp32); set it "
                            "there")
    for name in overrides:
        if not hasattr(preset_config, name):
            fields = sorted(preset_config.to_dict())
            raise UserError(f"{key}.overrides.{name}: not a field of {type(preset_config).__name__}"
                            f"{did_you_mean(name, fields)}")
    for alias, own in getattr(type(preset_config), "attribute_map", {}).items():
        if alias in overrides and own in overrides:  # one field twice (MPT: num_hidden_layers is n_layers)
            raise UserError(f"{key}.overrides.{alias}: is {type(preset_config).__name__}'s {own}, which the "
                            "overrides set too; set one of them")
    fields, _ = preset_config.get_config_dict(source)
    merged = _merge(fields, overrides)
    check_config(merged, f"{key}.overrides")  # the sizes together, as config.json's are checked
    if any(name in overrides for name in ("vocab_size", *TOKEN_IDS)):  # its special tokens still in its vocabulary
        check_token_ids(merged, f"{key}.overrides")
    try:
        return type(preset_config).from_dict(merged)
    except Exception as e:  # the config class's own checks (heads not dividing hidden_size, a rope type it lacks)
        cause = e.__cause__ if isinstance(e.__cause__, Exception) else e  # huggingface_hub wraps the check's error
        raise UserError(f"{key}.overrides: {type(preset_config).__name__} rejects them ({type(cause).__name__}: "
                        f"{_first_line(cause)})") from None


def with_fewer_layers(hf_config, layers: int):
    """The same architecture cut to its first `layers` layers, rebuilt (see `_with_overrides`); a per-layer list
    (layer_types) is cut with it."""
    fields = hf_config.to_dict()
    fields["num_hidden_layers"] = layers
    if isinstance(fields.get("layer_types"), list):
        fields["layer_types"] = fields["layer_types"][:layers]
    return type(hf_config).from_dict(fields)


def _merge(base: dict, overrides: dict) -> dict:
    """`overrides` over `base`; a nested mapping (a sub-config such as text_config) is merged key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = _merge(merged[key], value)
        merged[key] = value
    return merged


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)


def model_class(hf_config):
    """transformers' Auto class that builds the model: AutoModelForImageTextToText for a config with a vision tower
    (its language model and the tower together), AutoModelForCausalLM for every other."""
    import transformers

    vision = getattr(hf_config, "vision_config", None) is not None
    return transformers.AutoModelForImageTextToText if vision else transformers.AutoModelForCausalLM


@functools.lru_cache(maxsize=8)
def _count_parameters(config_json: str) -> int:
    import torch
    from transformers import AutoConfig

    hf_config = AutoConfig.for_model(**json.loads(config_json))
    with torch.device("meta"):
        model = model_class(hf_config).from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def count_parameters(hf_config) -> int:
    return _count_parameters(hf_config.to_json_string(use_diff=False))

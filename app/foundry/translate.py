"""llm-foundry inference-benchmark YAMLs (scripts/inference/benchmarking/yamls/*.yaml) -> this harness's schema.

`translate` is a pure function from the raw mapping to (translated mapping, mapping lines): one line per
key it mapped or dropped, saying where it went or why it does not change what is measured. A key whose
value changes what is measured and has no equivalent here is a UserError naming it, never ignored.
The MPT model section is app/foundry/mpt.py's. The CLI glue at the end (`translate_for_cli`) prints the
translation and hands the mapping to load_config.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from app.foundry.lines import INIT_DEVICE, MODEL_USE_CACHE, TOKENIZER, TRAINING_ONLY, MappingLines, show
from app.foundry.mpt import mpt_model
from harness.config.sweep import SweepConfig
from harness.errors import UserError

# Keys both schemas share, with the same meaning: they pass through unchanged.
SHARED_KEYS = ("batch_sizes", "input_lengths", "output_lengths", "num_batches", "num_warmup_batches", "seed")
# Top-level keys only llm-foundry's benchmark.py reads: any of them (or model.name) marks its YAML.
FOUNDRY_KEYS = ("model_dtype", "use_deepspeed", "tokenizer", "tokenizer_name", "max_seq_len", "use_cache",
                "autocast_dtype", "autocast_precision", "device", "warmup", "num_runs")
MODEL_NAMES = ("mpt_causal_lm", "hf_causal_lm")
DTYPE_NAMES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
}
HF_DROPPED = {
    "init_device": INIT_DEVICE,
    "tokenizer_name": TOKENIZER,
    "trust_remote_code": "the harness runs the architectures transformers implements, never a checkpoint's code",
    "use_auth_token": "hub credentials come from the environment (HF_TOKEN)",
    "token": "hub credentials come from the environment (HF_TOKEN)",
    "use_cache": MODEL_USE_CACHE,
    **{k: TRAINING_ONLY for k in ("loss_fn", "use_train_metrics", "use_logits", "shift_labels", "z_loss",
                                  "additional_train_metrics", "additional_eval_metrics")},
}
HF_FIXED = {
    "load_in_8bit": (False, "8-bit quantized weights are another model to measure"),
    "attention_patch_type": (None, "llm-foundry's attention patches are not transformers' code"),
    "peft_config": (None, "adapters change the model measured"),
}
DEVICES = {None: "auto", "cpu": "cpu", "cuda": "cuda", "cuda:0": "cuda"}


def is_foundry(raw: dict) -> bool:
    """An llm-foundry inference-benchmark YAML: it has a key only llm-foundry reads (or `model.name`) and none
    only this harness reads, so a harness YAML with a stray key still gets the harness's own error."""
    harness_only = {f.name for f in dataclasses.fields(SweepConfig)} - set(SHARED_KEYS) - {"benchmark_name", "model"}
    if harness_only & raw.keys():
        return False
    model = raw.get("model")
    return bool(set(FOUNDRY_KEYS) & raw.keys()) or (isinstance(model, dict) and "name" in model)


def translate(raw: dict, source_name: str) -> Tuple[Dict[str, Any], List[str]]:
    """(this harness's YAML mapping, mapping lines) for an llm-foundry YAML; `source_name` is its file name, whose
    stem names the benchmark when benchmark_name is absent. Raises UserError for what cannot be mapped."""
    conf = _resolved(raw)
    lines = MappingLines()
    name = conf.pop("benchmark_name", None)
    if name is None:
        name = _name_from(source_name)
        lines.append(f"benchmark_name: absent -> benchmark_name: {name} (the YAML's file name)")
    else:
        lines.mapped("benchmark_name", name, "benchmark_name")
    model, entry = _model(conf.pop("model", None), lines)
    model["dtype"] = _dtype(conf, lines)
    model = {k: model[k] for k in ("preset", "name_or_path", "weights", "dtype", "overrides") if k in model}
    _autocast(conf, model["dtype"], lines)
    entry = {**_backend(conf, lines), **entry}
    out: Dict[str, Any] = {"benchmark_name": name, "model": model, "backends": [entry]}
    out.update(_sweep_keys(conf, lines))
    _generation_keys(conf, out, lines)
    for key in ("tokenizer", "tokenizer_name"):
        if key in conf:
            lines.dropped(key, conf.pop(key), TOKENIZER)
    if "max_seq_len" in conf:
        lines.dropped("max_seq_len", conf.pop("max_seq_len"), "a variable for ${max_seq_len} interpolations "
                      "(resolved); the model's own length is model.max_seq_len")
    if conf:
        key = next(iter(conf))
        raise UserError(f"{key}: not a key of llm-foundry's inference benchmark this translation knows (known: "
                        f"benchmark_name, model, {', '.join(FOUNDRY_KEYS)}, {', '.join(SHARED_KEYS)})")
    return out, list(lines)


def _resolved(raw: dict) -> dict:
    """The mapping with its OmegaConf `${...}` interpolations resolved, as llm-foundry's OmegaConf load does."""
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(raw), resolve=True)
        assert isinstance(resolved, dict)  # a mapping's container: OmegaConf.create made a DictConfig of it
        return resolved
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        msg = (getattr(e, "msg", None) or str(e)).strip().splitlines()[0]
        raise UserError(f"{key}: cannot resolve its interpolation ({msg})") from None


def _name_from(source_name: str) -> str:
    """A benchmark_name from the file's stem, kept to the characters a folder name allows here."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source_name).stem).strip("-._")
    return stem or "llm-foundry"


def _model(section: Any, lines: MappingLines) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the `model` section, backend-entry options the model needs)."""
    if not isinstance(section, dict) or "name" not in section:
        raise UserError(f"model: expected llm-foundry's model section with name: {' or '.join(MODEL_NAMES)}")
    section = dict(section)
    name = section.pop("name")
    if name == "mpt_causal_lm":
        return mpt_model(section, lines)
    if name == "hf_causal_lm":
        return _hf_model(section, lines)
    raise UserError(f"model.name: {name!r} is not a model this harness can build from llm-foundry's YAML (allowed: "
                    f"{', '.join(MODEL_NAMES)})")


def _hf_model(section: dict, lines: MappingLines) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    path = section.pop("pretrained_model_name_or_path", None)
    if not path:
        raise UserError("model.pretrained_model_name_or_path: required with name: hf_causal_lm (a local model "
                        "folder or hub id)")
    lines.mapped("model.pretrained_model_name_or_path", path, "model.name_or_path")
    model: Dict[str, Any] = {"name_or_path": path, "weights": "random"}
    pretrained = show(section.pop("pretrained")) if "pretrained" in section else "absent (llm-foundry's default: true)"
    lines.append(f"model.pretrained: {pretrained} -> model.weights: random (timings do not depend on weight "
                 "values, and random weights need only the config, not the checkpoint's download; run with "
                 "model.weights=pretrained to load them)")
    entry: Dict[str, Any] = {}
    for key in list(section):
        value = section.pop(key)
        key_path = f"model.{key}"
        if key == "config_overrides":
            if not isinstance(value, (dict, type(None))):
                raise UserError(f"{key_path}: expected a mapping of config fields, got {show(value)}")
            model["overrides"] = dict(value or {})
            lines.mapped(key_path, value, "model.overrides", why="fields of the checkpoint's transformers config")
        elif key == "use_flash_attention_2":
            if value:
                entry["attn_implementation"] = "flash_attention_2"
                lines.mapped(key_path, value, "backends[0].attn_implementation", "flash_attention_2")
            else:
                lines.dropped(key_path, value, "the entry's default attention (sdpa)")
        elif not lines.known(key_path, key, value, HF_DROPPED, HF_FIXED):
            raise UserError(f"{key_path}: not an hf_causal_lm option this translation knows (known: "
                            f"pretrained_model_name_or_path, pretrained, config_overrides, use_flash_attention_2, "
                            f"{', '.join([*HF_DROPPED, *HF_FIXED])})")
    return model, entry


def _dtype(conf: dict, lines: MappingLines) -> str:
    if "model_dtype" not in conf:
        raise UserError("model_dtype: required, as llm-foundry's benchmark.py requires it (fp32, fp16 or bf16)")
    value = conf.pop("model_dtype")
    dtype = DTYPE_NAMES.get(str(value))
    if dtype is None:
        raise UserError(f"model_dtype: {show(value)} is not one of fp32, fp16, bf16 (or torch's float32, "
                        "float16, bfloat16)")
    lines.mapped("model_dtype", value, "model.dtype", dtype)
    return dtype


def _autocast(conf: dict, dtype: str, lines: MappingLines) -> None:
    """Autocast to the weights' own dtype changes nothing; to another one it computes in a dtype no entry here
    runs in, so that is refused rather than measured as something else."""
    for key in ("autocast_dtype", "autocast_precision"):
        if key not in conf:
            continue
        value = conf.pop(key)
        if value is None:
            lines.dropped(key, value, "no autocast, as here")
        elif DTYPE_NAMES.get(str(value)) == dtype:
            lines.dropped(key, value, "autocast to the weights' own dtype changes nothing")
        else:
            raise UserError(f"{key}: {show(value)} with model_dtype {dtype}: mixed-precision autocast has no "
                            f"equivalent here (allowed: null or {dtype}); set model_dtype to the dtype to compute in")


def _backend(conf: dict, lines: MappingLines) -> Dict[str, Any]:
    device_value = conf.pop("device", None)
    if not isinstance(device_value, (str, type(None))) or device_value not in DEVICES:
        raise UserError(f"device: {show(device_value)} cannot be honoured (allowed: null, cpu, cuda, cuda:0; for "
                        "another GPU set CUDA_VISIBLE_DEVICES)")
    device = DEVICES[device_value]
    lines.mapped("device", device_value, "backends[0].device", device,
                 "cuda when present, else cpu, as llm-foundry chose" if device == "auto" else "")
    use_deepspeed = conf.pop("use_deepspeed", False)
    if use_deepspeed not in (True, False):
        raise UserError(f"use_deepspeed: expected true or false, got {show(use_deepspeed)}")
    if use_deepspeed:
        lines.mapped("use_deepspeed", True, "backends[0].name", "deepspeed",
                     "DeepSpeed-Inference AutoTP over every visible GPU (2 ranks on CPU); llm-foundry's script also "
                     "set replace_with_kernel_inject: add backends.0.replace_with_kernel_inject=true for those CUDA "
                     "kernels")
        return {"name": "deepspeed", "device": device}
    lines.mapped("use_deepspeed", use_deepspeed, "backends[0].name", "hf", "transformers generate, as llm-foundry's "
                 "script ran without DeepSpeed")
    return {"name": "hf", "device": device}


def _sweep_keys(conf: dict, lines: MappingLines) -> Dict[str, Any]:
    out = {}
    for key in SHARED_KEYS:
        if key in conf:
            out[key] = conf.pop(key)
            lines.mapped(key, out[key], key)
    if "num_runs" in conf:  # the name earlier versions of llm-foundry's benchmark.py gave num_batches
        runs = conf.pop("num_runs")
        if out.get("num_batches", runs) != runs:
            raise UserError(f"num_runs: {runs} disagrees with num_batches ({out['num_batches']}); set one")
        out["num_batches"] = runs
        lines.mapped("num_runs", runs, "num_batches", runs, "its earlier name")
    return out


def _generation_keys(conf: dict, out: Dict[str, Any], lines: MappingLines) -> None:
    if "use_cache" in conf:
        use_cache = conf.pop("use_cache")
        if use_cache is not True:
            raise UserError(f"use_cache: {show(use_cache)} cannot be honoured: every engine here decodes with its KV "
                            "cache (allowed: true)")
        lines.dropped("use_cache", use_cache, "every engine here decodes with its KV cache")
    if "warmup" in conf:
        warmup = conf.pop("warmup")
        if warmup:
            lines.dropped("warmup", warmup, "the harness warms up with num_warmup_batches untimed batches per point")
        elif out.get("num_warmup_batches", 0) != 0:
            raise UserError(f"warmup: false disagrees with num_warmup_batches ({out['num_warmup_batches']}); set one")
        else:
            out["num_warmup_batches"] = 0
            lines.mapped("warmup", warmup, "num_warmup_batches", 0)


def render(translated: Dict[str, Any], lines: List[str], source: str) -> str:
    """The translation as a harness YAML file: the mapping lines as comments above the mapping."""
    header = [f"# Translated from the llm-foundry inference-benchmark YAML {source} (app/foundry/).",
              "# How each of its keys was mapped or dropped:"]
    body = yaml.safe_dump(translated, sort_keys=False, default_flow_style=None, width=100)
    return "\n".join([*header, *(f"#   {line}" for line in lines), body])

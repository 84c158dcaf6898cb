"""Typed sweep configuration: YAML plus `key=value` overrides -> validated dataclasses.

This is the one place that knows every key (the small sections are harness/config/sections.py's, the stream's
harness/config/stream.py's, each backend's and workload's their own). Loading checks the shape (unknown keys,
types) through OmegaConf structured configs; `validate` checks values and cross-field
rules without touching a model. Every failure is a `UserError` naming the key path.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from harness.config.cluster import ClusterConfig, validate_cluster
from harness.config.loading import apply_override, read_yaml_mapping, to_dataclass
from harness.config.quantization import expand_quantization, quantizations
from harness.config.sections import (
    HardwareConfig,
    ModelConfig,
    OutputConfig,
    QualityConfig,
    SamplingConfig,
    StopConfig,
    validate_hardware,
    validate_model,
    validate_quality,
    validate_sampling,
)
from harness.config.stream import StreamConfig, replay_trace, validate_stream
from harness.errors import UserError
from harness.fields import is_int, opt

if typing.TYPE_CHECKING:
    from harness.config.registry import Registry


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


SCENARIOS = ("batch", "stream")


@dataclass
class SweepConfig:
    benchmark_name: str = opt(help="Names the results folder and the `benchmark_name` column.")
    model: ModelConfig = opt(factory=ModelConfig, help="What to load.")
    models: Optional[List[ModelConfig]] = opt(
        None, help="Several models to compare on the same engines and shapes, instead of `model`: a list of model "
        "sections, each run with every backend entry in a worker of its own."
    )
    backends: List[Any] = opt(
        factory=lambda: [{"name": "hf"}], help="Engines to measure: each entry has `name` and that backend's options."
    )
    scenario: str = opt("batch", help="batch: static batches of batch_sizes, one at a time | stream: requests "
                        "arriving over time (see `stream`).")
    # Any: a list or `auto`; `validate` checks which.
    batch_sizes: Any = opt(None, help="Sequences per batch, all submitted together (scenario: batch), or `auto`: "
                           "per entry and length pair, search for the largest batch that runs (see max_batch_size).")
    max_batch_size: Optional[int] = opt(None, help="With batch_sizes: auto, the largest batch the search tries "
                                        "(default 1024).")
    stream: StreamConfig = opt(factory=StreamConfig, help="Request streams (scenario: stream).")
    workload: Any = opt(
        factory=lambda: {"prompts": "random"}, help="What the prompts are: random token ids (default) or a prompt "
        "file through a template; see workloads/."
    )
    sampling: SamplingConfig = opt(factory=SamplingConfig, help="How tokens are picked (default: greedy).")
    input_lengths: Optional[List[int]] = opt(
        None, help="Prompt tokens per sequence, for random prompts (a prompt file sets its own lengths)."
    )
    output_lengths: Optional[List[int]] = opt(
        None, help="Generated tokens per sequence: forced exactly, or a cap with workload.stop_at_eos. Required, "
        "except with stream.arrival: trace (the trace gives each request's)."
    )
    # Any: a count or `auto`; `validate` checks which.
    num_batches: Any = opt(5, help="Timed batches per point, or `auto`: until the mean latency's 95% interval is "
                           "narrow enough (see stop).")
    stop: StopConfig = opt(factory=StopConfig, help="When `num_batches: auto` stops timing a point.")
    num_warmup_batches: int = opt(1, help="Untimed batches per point before the timed ones.")
    seed: int = opt(0, help="Seeds the random prompts (and random weights).")
    skip_larger_batches_after_oom: bool = opt(
        True, help="After an out-of-memory point, skip larger batch sizes at the same lengths."
    )
    memory_fraction: float = opt(
        0.9, help="Share of free memory a point's estimate may use; points estimated above it are skipped."
    )
    load_timeout_s: float = opt(
        3600, help="A worker that takes longer to start and load the model is killed (70B loads take minutes)."
    )
    point_timeout_s: float = opt(
        1800, help="A worker silent this long during one point (warm-up + timed batches) is killed as hung."
    )
    output: OutputConfig = opt(factory=OutputConfig, help="Where results go besides the local folder.")
    hardware: HardwareConfig = opt(factory=HardwareConfig, help="Peaks and price the numbers are held against.")
    quality: QualityConfig = opt(factory=QualityConfig, help="The accuracy price quantized entries are held to.")
    cluster: ClusterConfig = opt(factory=ClusterConfig, help="The machines entries with `nodes` above 1 run across "
                                 "(docs/measurement.md, \"More than one node\").")


def load_config(path: str | Path, overrides: List[str], backends: "Registry", workloads: "Registry",
                raw: Optional[dict] = None) -> SweepConfig:
    """Read a sweep YAML, apply dotlist overrides, check shape and values.

    The registries (backends/registry.py's BACKENDS, workloads/registry.py's WORKLOADS) turn the `backends` entries and the
    `workload` section into their typed options; a workload's file paths are resolved against the
    YAML's folder first, then the working directory. `raw`, where given, is the mapping to load instead of the
    file's (a translation of it: app/foundry/).
    """
    from harness.config.speculative import expand_entries  # it builds on this module

    raw = read_yaml_mapping(Path(path)) if raw is None else raw
    for item in overrides:
        apply_override(raw, item)
    _replace_model_sources(raw, overrides)
    if "model" in raw and "models" in raw:
        raise UserError("models: give `model` (one) or `models` (a list to compare), not both")
    config = to_dataclass(SweepConfig, raw)
    entries = []
    expanded = expand_quantization(expand_entries(config.backends), quantizations(model_sections(config)))
    for key, spec_key, entry in expanded:
        options = backends.options(entry, key)
        options.yaml_keys = {"entry": key, "speculative": spec_key}  # see entry_key
        entries.append(options)
    config.backends = entries
    config.workload = workloads.options(config.workload, "workload")
    config.workload.resolve_paths(Path(path).parent)
    config.stream.resolve_paths(Path(path).parent)
    config.quality.resolve_paths(Path(path).parent)
    validate(config)
    return config


# A model comes from a preset or from name_or_path, never both. Naming one on the command line replaces the other
# from the YAML, so `model.name_or_path=DIR` runs your own model through any shipped sweep.
_SOURCE_OVERRIDE = re.compile(r"^(model|models\.(\d+))\.(preset|name_or_path)$")
_OTHER_SOURCE = {"preset": "name_or_path", "name_or_path": "preset"}


def _replace_model_sources(raw: dict, overrides: List[str]) -> None:
    """A model section whose preset (or name_or_path) an override set, and not the other one too, drops the other
    one the YAML gave."""
    named: Dict[Tuple[str, Optional[str]], set] = {}
    for item in overrides:
        match = _SOURCE_OVERRIDE.match(item.partition("=")[0].strip())
        if match:
            named.setdefault((match.group(1).split(".")[0], match.group(2)), set()).add(match.group(3))
    for (key, index), given in named.items():
        section = raw.get(key)
        if index is not None:
            section = section[int(index)] if isinstance(section, list) and int(index) < len(section) else None
        if len(given) == 1 and isinstance(section, dict):
            (source,) = given
            if section.get(source) is not None:
                section[_OTHER_SOURCE[source]] = None


def validate(config: SweepConfig) -> None:
    """Value and cross-field checks that need no model."""
    if not _NAME_RE.match(config.benchmark_name):
        raise UserError(
            f"benchmark_name: {config.benchmark_name!r} is not allowed (letters, digits, '.', '_', '-'; "
            "it names a folder)"
        )
    _validate_scenario(config)
    if config.output_lengths is None:
        raise UserError("output_lengths: required, e.g. output_lengths: [128]")
    _check_positive_list("output_lengths", config.output_lengths)
    if config.input_lengths is not None:
        _check_positive_list("input_lengths", config.input_lengths)
    _validate_num_batches(config)
    if config.num_warmup_batches < 0:
        raise UserError(f"num_warmup_batches: must be 0 or more, got {config.num_warmup_batches}")
    for key in ("load_timeout_s", "point_timeout_s"):
        if getattr(config, key) <= 0:
            raise UserError(f"{key}: must be more than 0 seconds, got {getattr(config, key)}")
    if not 0 < config.memory_fraction <= 1:
        raise UserError(f"memory_fraction: must be in (0, 1], got {config.memory_fraction}")
    if config.models == []:
        raise UserError("models: must list at least one model section, e.g. [{preset: llama-2-7b}]")
    for key, model in model_sections(config):
        validate_model(model, key)
    validate_sampling(config.sampling)
    config.workload.validate(config)
    config.workload.validate_shared(config)
    _validate_backends(config.backends, config.workload)
    if config.output.upload_uri:
        _validate_upload_uri(config.output.upload_uri)
    validate_hardware(config.hardware)
    validate_quality(config.quality, model_sections(config))
    validate_cluster(config.cluster, config.backends, [entry_key(e, i) for i, e in enumerate(config.backends)])


def _validate_num_batches(config: SweepConfig) -> None:
    stop = config.stop
    if config.num_batches != "auto":
        if not is_int(config.num_batches) or config.num_batches < 1:
            raise UserError(f"num_batches: must be an integer of at least 1, or auto, got {config.num_batches!r}")
        if stop != StopConfig():
            raise UserError("stop: decides when num_batches: auto stops timing; with a fixed num_batches, remove it")
        return
    if not stop.target_ci_pct > 0:
        raise UserError(f"stop.target_ci_pct: must be more than 0 (%), got {stop.target_ci_pct}")
    if stop.min_batches < 2:
        raise UserError(f"stop.min_batches: must be at least 2 (an interval needs two batches), got "
                        f"{stop.min_batches}")
    if stop.max_batches < stop.min_batches:
        raise UserError(f"stop.max_batches: must be at least stop.min_batches ({stop.min_batches}), got "
                        f"{stop.max_batches}")


def _validate_scenario(config: SweepConfig) -> None:
    if config.scenario not in SCENARIOS:
        raise UserError(f"scenario: {config.scenario!r} is not one of {', '.join(SCENARIOS)}")
    if config.scenario == "batch":
        if config.batch_sizes is None:
            raise UserError("batch_sizes: required with scenario: batch, e.g. batch_sizes: [1, 8], or auto")
        _validate_batch_sizes(config)
        return
    for key in ("batch_sizes", "max_batch_size"):
        if getattr(config, key) is not None:
            raise UserError(f"{key}: not used with scenario: stream (requests arrive over time at "
                            f"stream.request_rates); remove {key} or set scenario: batch")
    validate_stream(config.stream)
    if config.stream.arrival == "trace":
        for key in ("input_lengths", "output_lengths"):
            if getattr(config, key) is not None:
                raise UserError(f"{key}: stream.trace gives every request's lengths; remove {key}")
        config.output_lengths = [replay_trace(config.stream).max_output_tokens]


def _validate_batch_sizes(config: SweepConfig) -> None:
    if is_int(config.batch_sizes):
        config.batch_sizes = [config.batch_sizes]
    if config.batch_sizes != "auto":
        if not isinstance(config.batch_sizes, list):
            raise UserError(f"batch_sizes: must be a list of positive integers or auto, got {config.batch_sizes!r}")
        for i, size in enumerate(config.batch_sizes):
            if not is_int(size):
                raise UserError(f"batch_sizes[{i}]: expected an integer, got {size!r}")
        _check_positive_list("batch_sizes", config.batch_sizes)
        if config.max_batch_size is not None:
            raise UserError("max_batch_size: bounds the search of batch_sizes: auto; with a list of batch sizes, "
                            "remove it")
    elif config.max_batch_size is not None and config.max_batch_size < 1:
        raise UserError(f"max_batch_size: must be at least 1, got {config.max_batch_size}")


def _validate_upload_uri(uri: str) -> None:
    import fsspec

    protocol = uri.split("://", 1)[0] if "://" in uri else "file"
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise UserError(f"output.upload_uri: unknown protocol {protocol!r} (fsspec URLs: s3://, gs://, file://, "
                        "...)") from None
    except ImportError as e:
        raise UserError(f"output.upload_uri: {protocol}:// needs a package fsspec does not have here ({e})") from None


def _check_positive_list(key: str, values: List[int]) -> None:
    if not values:
        raise UserError(f"{key}: must be a non-empty list of positive integers, got []")
    bad = [v for v in values if v < 1]
    if bad:
        raise UserError(f"{key}: must be a non-empty list of positive integers, got {bad[0]}")
    if len(set(values)) != len(values):
        raise UserError(f"{key}: has duplicates: {values}")


def model_sections(config: SweepConfig) -> List[Tuple[str, ModelConfig]]:
    """The sweep's model sections with where each is in the YAML: `model`, or each item of `models`."""
    if config.models is None:
        return [("model", config.model)]
    return [(f"models[{i}]", model) for i, model in enumerate(config.models)]


def _validate_backends(entries: List[Any], workload: Any) -> None:
    if not entries:
        raise UserError("backends: must list at least one backend, e.g. [{name: hf}]")
    seen: Dict[str, str] = {}
    for i, entry in enumerate(entries):
        key = entry_key(entry, i)
        if entry.entry_label in seen:
            raise UserError(
                f"{key}.label: {entry.entry_label!r} is already used by {seen[entry.entry_label]}; give each entry a "
                "unique label"
            )
        seen[entry.entry_label] = key
        entry.validate(key)
        entry.validate_workload(key, workload)
        if entry.speculative is not None:
            from harness.config.speculative import spec_key

            entry.speculative.validate(spec_key(entry, key))


def entry_key(entry: Any, index: int) -> str:
    """Where a backend entry is in the YAML, for messages. Entries expanded from one `speculative` list share their
    entry's key; `load_config` notes it on each (`yaml_keys`), an entry built in code is at its index."""
    return getattr(entry, "yaml_keys", {}).get("entry", f"backends[{index}]")


def to_plain(config: SweepConfig) -> Dict[str, Any]:
    """The resolved config as plain data, for the manifest and for `--resume` checks; it loads as a YAML again
    (config.yaml, platform runs), so it holds `model` or `models`, never both."""
    plain = dataclasses.asdict(config)
    del plain["model" if config.models is not None else "models"]
    for section in plain.get("models") or [plain["model"]]:
        section["quantization"] = "none"  # spent: each backend entry carries its own (harness/config/quantization.py)
    return plain

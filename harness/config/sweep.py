"""Typed sweep configuration: YAML plus `key=value` overrides -> a validated `SweepConfig`.

This is the one place that knows every key (the small sections are harness/config/sections.py's, the stream's
harness/config/stream/section.py's, each backend's and workload's their own). Loading happens in two steps, each
building its object once: `SweepYaml`, the keys as harness/config/kinds.py checks them against their declarations
(unknown keys, kinds, ranges) and OmegaConf builds them, then `SweepConfig`,
the same keys with their final types, built only from values that passed the checks (`_typed`), which need no
model. Nothing is assigned to either afterwards. Every failure is a `UserError` naming the key path.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Protocol, Tuple, Union

from harness.config.accuracy import AccuracyConfig, validate_accuracy
from harness.config.cluster import ClusterConfig, validate_cluster
from harness.config.engine import BackendOptions, pooling_entry
from harness.config.grid import expand_grids
from harness.config.kinds import show
from harness.config.loading import apply_override, read_yaml_mapping, to_dataclass
from harness.config.quantization import expand_quantization, quantizations
from harness.config.sections import (
    HardwareConfig,
    ModelConfig,
    QUANTIZATIONS,
    OutputConfig,
    QualityConfig,
    SamplingConfig,
    StopConfig,
    TargetConfig,
    validate_hardware,
    validate_model,
    validate_output,
    validate_quality,
    validate_target,
)
from harness.config import sweep_values as values
from harness.config.stream import StreamConfig
from harness.config.sections import TrackingConfig, validate_tracking
from harness.config.sweep_values import check_positive_list
from harness.errors import UserError
from harness.fields import SEED_MAX, WEEK_S, opt
from harness.files import MAX_NAME_CHARS

if typing.TYPE_CHECKING:
    from harness.config.registry import Registry


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")



@dataclass
class SweepYaml:
    """The keys a sweep YAML may hold, as OmegaConf checks them (and `--schema` lists them). Four hold what OmegaConf
    cannot type (a list or `auto`; an engine's or a workload's own options, picked by name): `Any` here, read into
    their final types by `load_config` (`SweepConfig`)."""

    benchmark_name: str = opt(help="Names the results folder and the `benchmark_name` column.")
    model: ModelConfig = opt(factory=ModelConfig, help="What to load.")
    models: Optional[List[ModelConfig]] = opt(
        None, help="Several models to compare on the same engines and shapes, instead of `model`: a list of model "
        "sections, each run with every backend entry in a worker of its own."
    )
    backends: List[Any] = opt(  # each entry: its backend's Options
        factory=lambda: [{"name": "hf"}], help="Engines to measure: each entry has `name` and that backend's options."
    )
    scenario: str = opt("batch", help="batch: static batches of batch_sizes, one at a time | stream: requests "
                        "arriving over time (see `stream`).")
    batch_sizes: Any = opt(None, help="Sequences per batch, all submitted together (scenario: batch), or `auto`: "
                           "per entry and length pair, search for the largest batch that runs (see max_batch_size).")
    max_batch_size: Optional[int] = opt(None, ge=1, help="With batch_sizes: auto, the largest batch the search tries "
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
    num_batches: Any = opt(5, help="Timed batches per point, or `auto`: until the mean latency's 95% interval is "
                           "narrow enough (see stop).")
    stop: StopConfig = opt(factory=StopConfig, help="When `num_batches: auto` stops timing a point.")
    num_warmup_batches: int = opt(1, ge=0, help="Untimed batches per point before the timed ones.")
    seed: int = opt(0, ge=0, le=SEED_MAX, help="Seeds the random prompts (and random weights).")
    keep_prefix_cache: bool = opt(
        False, help="Keep what an engine's prefix cache holds from one point to the next. By default it is emptied "
        "before each point (vLLM in process; a vLLM server through its /reset_prefix_cache), so a point's hit rate "
        "is its own and a repeated prompt is not served from an earlier point's cache."
    )
    skip_larger_batches_after_oom: bool = opt(
        True, measures=False, help="After an out-of-memory point, skip larger batch sizes at the same lengths."
    )
    memory_fraction: float = opt(
        0.9, gt=0, le=1, measures=False, help="Share of free memory a point's estimate may use; points estimated above "
                                              "it are skipped."
    )
    load_timeout_s: float = opt(
        3600, gt=0, le=WEEK_S, unit="seconds", measures=False, help="A worker that takes longer to start and load the "
                "model is killed (70B loads take minutes)."
    )
    point_timeout_s: float = opt(
        1800, gt=0, le=WEEK_S, unit="seconds", measures=False, help="A worker silent this long during one point "
                "(warm-up + timed batches) is killed as hung."
    )
    preload_workers: bool = opt(
        True, measures=False, help="Fork each entry's worker from a process that has already imported its engine's "
                                   "packages, where the entry runs in one process off the GPU (seconds sooner per "
                                   "entry); false: a new interpreter for each."
    )
    output: OutputConfig = opt(factory=OutputConfig, measures=False, help="Where results go besides the local folder.")
    hardware: HardwareConfig = opt(factory=HardwareConfig, help="Peaks and price the numbers are held against.")
    quality: QualityConfig = opt(factory=QualityConfig, help="The accuracy price quantized entries are held to.")
    accuracy: AccuracyConfig = opt(factory=AccuracyConfig, help="Task accuracy of every entry, through the engine "
                                   "it timed (docs/measurement.md, \"Accuracy\").")
    target: TargetConfig = opt(factory=TargetConfig, measures=False, help="What the best configuration must meet "
                               "(docs/guides/best.md).")
    cluster: ClusterConfig = opt(
        factory=ClusterConfig, measures=False, help="The machines entries with `nodes` above 1 run across "
                                 "(docs/measurement.md, \"More than one node\").")
    tracking: TrackingConfig = opt(factory=TrackingConfig, measures=False, help="Experiment trackers the results "
                                   "are also sent to: mlflow, wandb (docs/guides/tracking.md).")


class WorkloadConfig(Protocol):
    """The `workload` section once read: a workload's own options (workloads/base.py, WorkloadOptions), picked by
    its `prompts`. The library never imports workloads: this is what loading asks of them."""

    prompts: str

    def resolve_paths(self, config_dir: Path) -> None: ...

    def validate(self, config: SweepConfig) -> None: ...

    def validate_shared(self, config: SweepConfig) -> None: ...


@dataclass(frozen=True)
class EntryKeys:
    """Where a backend entry is in the YAML, for messages. Entries expanded from one entry's `speculative` list,
    `model.quantization` list or `grid` share that entry's key; each `speculative` item has its own."""

    entry: str
    speculative: str


@dataclass
class SweepConfig(SweepYaml):
    """A validated sweep: `SweepYaml`'s keys, those OmegaConf cannot type in their final types. `load_config` builds
    it; a test may build one in code (entries then have no `entry_keys`: messages name them by index)."""

    backends: List[BackendOptions] = field(default_factory=list)
    batch_sizes: Union[List[int], Literal["auto"], None] = None  # a list (an integer read as one) or auto; None: stream
    workload: WorkloadConfig = field(kw_only=True)
    output_lengths: List[int] = field(kw_only=True)  # a trace's: its longest output
    num_batches: Union[int, Literal["auto"]] = 5
    entry_keys: List[EntryKeys] = field(default_factory=list, kw_only=True)  # one per `backends` entry

def load_config(path: str | Path, overrides: List[str], backends: "Registry", workloads: "Registry",
                raw: Optional[dict] = None, large_grids: bool = False) -> SweepConfig:
    """Read a sweep YAML, apply dotlist overrides, check shape and values.

    The registries (backends/registry.py's BACKENDS, workloads/registry.py's WORKLOADS) turn the `backends` entries and the
    `workload` section into their typed options; a workload's file paths are resolved against the
    YAML's folder first, then the working directory. `raw`, where given, is the mapping to load instead of the
    file's (a translation of it: app/foundry/). `large_grids` (--yes) lets a backend entry's `grid` make more
    entries than harness/config/grid.py's MAX_GRID_ENTRIES.
    """
    raw = read_yaml_mapping(Path(path)) if raw is None else raw
    for item in overrides:
        apply_override(raw, item)
    _replace_model_sources(raw, overrides)
    if raw.get("model") is None and raw.get("models") is not None:
        raw.pop("model", None)  # `model: null` beside `models`: the one model given is none
    if "model" in raw and "models" in raw:
        raise UserError("models: give `model` (one) or `models` (a list to compare), not both")
    config = _typed(to_dataclass(SweepYaml, raw), backends, workloads, Path(path).parent, large_grids)
    validate(config)
    return config


def _typed(parsed: SweepYaml, backends: "Registry", workloads: "Registry", folder: Path,
           large_grids: bool = False) -> SweepConfig:
    """The checked YAML in its final types: each backend entry (one per `speculative` item, quantization and
    combination of its `grid`) and the workload as their own options, with their paths resolved against the YAML's
    folder; the batch sizes and lengths once their own checks pass."""
    from harness.config.speculative import expand_entries  # it builds on this module

    expanded = expand_quantization(expand_entries(parsed.backends), quantizations(model_sections(parsed)))
    expanded = expand_grids(expanded, backends, large_grids)
    workload = workloads.options(parsed.workload, "workload")
    for section in (workload, parsed.stream, parsed.quality, parsed.accuracy):
        section.resolve_paths(folder)
    entries = [backends.options(entry, key) for key, _, entry in expanded]
    for entry in entries:
        entry.resolve_paths(folder)
    pooling = pooling_entry(entries, [key for key, _, _ in expanded], parsed.accuracy)
    typed = dict(
        backends=entries, entry_keys=[EntryKeys(key, spec) for key, spec, _ in expanded],
        workload=workload, batch_sizes=values.batch_sizes(parsed),
        output_lengths=values.output_lengths(parsed, pooling), num_batches=values.num_batches(parsed),
    )
    kept = {f.name: getattr(parsed, f.name) for f in dataclasses.fields(SweepYaml) if f.name not in typed}
    return SweepConfig(**kept, **typed)


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
    """Value and cross-field checks of the typed config that need no model. Each key's kind and range were checked
    as it was read (harness/config/kinds.py, from its declaration); these are what one key cannot say alone."""
    if not _NAME_RE.match(config.benchmark_name) or len(config.benchmark_name) > MAX_NAME_CHARS:
        raise UserError(
            f"benchmark_name: {show(config.benchmark_name, 80)} is not allowed (letters, digits, '.', '_', '-', at "
            f"most {MAX_NAME_CHARS} characters; it names a folder)"
        )
    if config.input_lengths is not None:
        check_positive_list("input_lengths", config.input_lengths)
    if config.models == []:
        raise UserError("models: must list at least one model section, e.g. [{preset: llama-2-7b}]")
    for key, model in model_sections(config):
        validate_model(model, key)
    config.workload.validate(config)
    config.workload.validate_shared(config)
    _validate_backends(config)
    validate_output(config.output)
    validate_tracking(config.tracking)
    validate_hardware(config.hardware)
    validate_quality(config.quality, model_sections(config))
    validate_accuracy(config.accuracy)
    validate_target(config.target)
    validate_cluster(config.cluster, config.backends, [entry_key(config, i) for i in range(len(config.backends))])


def model_sections(config: SweepYaml) -> List[Tuple[str, ModelConfig]]:
    """The sweep's model sections with where each is in the YAML: `model`, or each item of `models`."""
    if config.models is None:
        return [("model", config.model)]
    return [(f"models[{i}]", model) for i, model in enumerate(config.models)]


def _validate_backends(config: SweepConfig) -> None:
    if not config.backends:
        raise UserError("backends: must list at least one backend, e.g. [{name: hf}]")
    seen: Dict[str, str] = {}
    for i, entry in enumerate(config.backends):
        key = entry_key(config, i)
        if entry.entry_label in seen:
            raise UserError(
                f"{key}.label: {entry.entry_label!r} is already used by {seen[entry.entry_label]}; give each entry a "
                "unique label"
            )
        seen[entry.entry_label] = key
        label = entry.entry_label if entry.label is None else entry.label
        if not label.strip() or not label.isprintable():
            raise UserError(f"{key}.label: must be printable text, not empty, got {label!r}")
        if entry.quantization not in QUANTIZATIONS:
            raise UserError(f"{key}.quantization: {entry.quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
        entry.validate(key)
        for held_to in ("json_schema", "tools"):
            if getattr(config.workload, held_to, None) is not None and not entry.holds_answers_to_a_schema:
                raise UserError(f"{key}.name: {entry.name} cannot hold answers to workload.{held_to}; openai "
                                "entries (endpoint chat, responses or messages) ask their server for it and check "
                                "every answer")
        entry.validate_workload(key, config.workload)
        _validate_profile(entry, key, config.scenario)
        if entry.lora is not None:
            why = entry.cannot_serve_lora() or (None if config.scenario == "stream" else
                                                 "each request names an adapter drawn from the mix in a stream; "
                                                 "scenario: batch runs without adapters")
            if why is not None:
                raise UserError(f"{key}.lora: {why}")
            entry.lora.validate(f"{key}.lora")
        if entry.speculative is not None:
            entry.speculative.validate(spec_key(config, i))


def _validate_profile(entry: BackendOptions, key: str, scenario: str) -> None:
    """`profile: true` where the engine has no profiler, or on a stream (it traces one static batch), is refused."""
    why = entry.cannot_profile() if entry.profile else None
    if entry.profile and scenario != "batch":
        why = f"traces one static batch per point (scenario: batch), not scenario: {scenario}"
    if why is not None:
        raise UserError(f"{key}.profile: {why}")


def entry_key(config: SweepConfig, index: int) -> str:
    """Where backend entry `index` is in the YAML, for messages (`EntryKeys`); an entry built in code is at its
    index."""
    return config.entry_keys[index].entry if index < len(config.entry_keys) else f"backends[{index}]"


def spec_key(config: SweepConfig, index: int) -> str:
    """Where entry `index`'s `speculative` section is in the YAML: an item of a list has its own."""
    if index < len(config.entry_keys):
        return config.entry_keys[index].speculative
    return f"{entry_key(config, index)}.speculative"


def to_plain(config: SweepConfig) -> Dict[str, Any]:
    """The resolved config as plain data, for the manifest and for `--resume` checks; it loads as a YAML again
    (config.yaml, platform runs), so it holds `model` or `models`, never both."""
    whole = dataclasses.asdict(config)
    plain = {f.name: whole[f.name] for f in dataclasses.fields(SweepYaml)}  # the YAML's keys, not entry_keys
    del plain["model" if config.models is not None else "models"]
    for section in plain.get("models") or [plain["model"]]:
        section["quantization"] = "none"  # spent: each backend entry carries its own (harness/config/quantization.py)
    return plain

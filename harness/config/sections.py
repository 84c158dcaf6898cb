"""The small sections of a sweep config (model, sampling, stop, output, hardware, quality) and their value checks;
the sweep itself, loading and cross-field checks are harness/config/sweep.py's."""

from __future__ import annotations

import importlib.util
import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from harness.files import beside_yaml
from harness.errors import UserError
from harness.fields import SEED_MAX, opt

DTYPES = ("bf16", "fp16", "fp32")
WEIGHTS = ("random", "pretrained")
# Weight quantization (docs/measurement.md, "Quantization"): int8 and int4 weight-only, fp8 weights.
QUANTIZATIONS = ("none", "int8", "int4", "fp8")


@dataclass
class ModelConfig:
    label: Optional[str] = opt(None, help="Name of this model in results (the `model` column); default: the preset or "
                               "name_or_path, with its overrides. Unique within `models`.")
    preset: Optional[str] = opt(None, help="Architecture shipped in harness/presets/, e.g. llama-2-70b.")
    name_or_path: Optional[str] = opt(None, help="Local model folder or hub id, instead of a preset.")
    weights: str = opt(
        "random",
        help="random: build from the architecture, nothing downloaded (timings do not depend on weight "
        "values); pretrained: load the weights of name_or_path.",
    )
    dtype: str = opt("bf16", help="bf16 | fp16 | fp32.")
    overrides: Dict[str, Any] = opt(factory=dict, help="Architecture fields to change, e.g. {num_hidden_layers: 2}.")
    tokenizer: Optional[str] = opt(
        None, help="Tokenizer folder or hub id for a prompt file; default: name_or_path, or the preset's own "
        "tokenizer where it ships one (tiny-llama)."
    )
    # Any: one value or a list; the entries' expansion (harness/config/quantization.py) checks it.
    quantization: Any = opt("none", help="Weights as loaded: none | int8 | int4 (weight-only) | fp8; a list makes "
                            "one entry per value of every backend entry, each quantized row carrying its accuracy "
                            "price against the unquantized entry.")


@dataclass
class SamplingConfig:
    """The same for every backend. The default is greedy: deterministic, and engines can be cross-checked."""

    temperature: float = opt(0.0, ge=0, help="0: greedy; above 0: sample from the softmax at this temperature.")
    top_p: float = opt(
        1.0, gt=0, le=1, help="Nucleus sampling: keep the smallest set of tokens holding this probability.")
    top_k: int = opt(0, ge=0, help="Keep only the k most likely tokens; 0: off.")
    seed: Optional[int] = opt(
        0, ge=0, le=SEED_MAX, help="Per-request sampling seeds derive from it, so sampled runs repeat where engines "
                              "allow; null: unseeded, as vLLM's own benchmark samples (seeded sampling's cost: "
                              "docs/measurement.md, Sampling).")


@dataclass
class HardwareConfig:
    """What the numbers are held against (harness/model/hardware.py): peaks for MBU, MFU and the roofline, and a price."""

    gpu: Optional[str] = opt(None, help="A GPU from harness/peaks.yaml (e.g. h100-sxm): its peaks, instead of "
                             "matching the name the driver reports; and the machine --plan and --dry-run plan for.")
    num_gpus: Optional[int] = opt(None, ge=1, help="With gpu: how many the planned machine has (default 1).")
    peak_memory_bandwidth_gbps: Optional[float] = opt(
        None, gt=0, unit="GB/s", help="Peak memory bandwidth of one device, GB/s; overrides the table (GPU) or the "
                                      "probe (CPU).")
    peak_tflops: Optional[float] = opt(
        None, gt=0, unit="TFLOP/s", help="Peak dense TFLOP/s of one device in the sweep's dtype; overrides "
                                       "the table or the probe.")
    cost_per_hour: Optional[float] = opt(None, gt=0, help="Price of one device for an hour (any currency): fills "
                                         "cost_per_million_output_tokens.")


@dataclass
class StopConfig:
    """`num_batches: auto`: time batches until the mean latency is known to within target_ci_pct."""

    target_ci_pct: float = opt(
        2.0, gt=0, unit="%", help="Stop when the 95% interval's half-width is within this share (in %) of "
                               "the mean latency.")
    min_batches: int = opt(5, ge=2, help="Timed batches before the interval is first looked at.")
    max_batches: int = opt(50, ge=2, help="Timed batches at most; a point stopped here is marked converged: false.")


@dataclass
class QualityConfig:
    """What a quantized entry may cost in accuracy (docs/measurement.md, "Quantization")."""

    max_logits_rel_error: float = opt(
        0.05, gt=0, help="The report names, per engine and point, the fastest quantization "
                                      "whose logits_rel_error is within this bound.")
    max_accuracy_drop: Optional[float] = opt(
        None, gt=0, le=1, help="With accuracy.tasks: a quantized entry is within the bound only if its accuracy is at "
        "most this much below its unquantized entry's (accuracy_delta >= -max_accuracy_drop), as well.")
    text: Optional[str] = opt(None, help="A UTF-8 text file: with pretrained weights, each entry's perplexity on it "
                              "(and a quantized entry's perplexity_delta against its unquantized one).")
    max_text_tokens: int = opt(4096, ge=2, help="The text's first tokens scored, at most.")
    window_tokens: int = opt(1024, ge=2, help="Perplexity is scored over non-overlapping windows of this many tokens "
                             "(at most the model's max positions).")

    def resolve_paths(self, config_dir: Path) -> None:
        """A relative text path is looked for beside the YAML first, then from the working directory."""
        self.text = beside_yaml(config_dir, self.text)


@dataclass
class OutputConfig:
    upload_uri: Optional[str] = opt(
        None, help="fsspec URL (s3://bucket/prefix, gs://..., file:///...) the results folder is also copied "
        "to when the sweep ends; needs that filesystem's package (s3fs, gcsfs, ...)."
    )


def validate_output(output: OutputConfig) -> None:
    uri = output.upload_uri
    if not uri:
        return
    import fsspec

    protocol = uri.split("://", 1)[0] if "://" in uri else "file"
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise UserError(f"output.upload_uri: unknown protocol {protocol!r} (fsspec URLs: s3://, gs://, file://, "
                        "...)") from None
    except ImportError as e:
        raise UserError(f"output.upload_uri: {protocol}:// needs a package fsspec does not have here ({e})") from None


def validate_model(model: ModelConfig, key: str) -> None:
    if model.dtype not in DTYPES:
        raise UserError(f"{key}.dtype: {model.dtype!r} is not one of {', '.join(DTYPES)}")
    if model.weights not in WEIGHTS:
        raise UserError(f"{key}.weights: {model.weights!r} is not one of {', '.join(WEIGHTS)}")
    if model.preset and model.name_or_path:
        raise UserError(f"{key}: set {key}.preset or {key}.name_or_path, not both")
    if not model.preset and not model.name_or_path:
        raise UserError(f"{key}: missing; set {key}.preset (see harness/presets/) or {key}.name_or_path")
    if model.weights == "pretrained" and not model.name_or_path:
        raise UserError(f"{key}.weights: 'pretrained' needs {key}.name_or_path (presets have no weights)")
    if model.label is not None and not model.label.isprintable():
        raise UserError(f"{key}.label: must be printable text (no tabs, line breaks or control characters), got "
                        f"{model.label!r}")


def validate_quality(quality: QualityConfig, models: Sequence[Tuple[str, ModelConfig]]) -> None:
    if quality.text is None:
        return
    if os.path.isdir(quality.text):
        raise UserError(f"quality.text: {quality.text!r} is a folder; give a UTF-8 text file")
    if not os.path.isfile(quality.text):
        raise UserError(f"quality.text: no such file {quality.text!r}")
    random = [key for key, model in models if model.weights != "pretrained"]
    if random:
        raise UserError(f"quality.text: perplexity needs pretrained weights; {random[0]}.weights is "
                        f"{dict(models)[random[0]].weights} (random weights have no perplexity worth reading)")


def validate_hardware(hardware: HardwareConfig) -> None:
    from harness.config.gpus import gpu_table

    if hardware.gpu is not None and hardware.gpu not in gpu_table():
        raise UserError(f"hardware.gpu: {hardware.gpu!r} is not in harness/peaks.yaml (known: "
                        f"{', '.join(gpu_table())})")
    if hardware.num_gpus is not None and hardware.gpu is None:
        raise UserError("hardware.num_gpus: needs hardware.gpu, the GPU the planned machine has")


TARGET_PERCENTILES = (50, 90, 99)  # the latency percentiles results.csv holds


@dataclass
class TargetConfig:
    """What a configuration must meet to be the answer (docs/guides/best.md): report.md's first section, the console's
    last lines and `python -m plots --best` name the configuration with the most output tokens/s per GPU that meets
    every target stated here (a stream sweep without it is held to its `stream.slo`)."""

    ttft_ms: Optional[float] = opt(None, gt=0, unit="ms", measures=False,
                                   help="Time to first token at `percentile`, at most.")
    tpot_ms: Optional[float] = opt(None, gt=0, unit="ms", measures=False,
                                   help="Time per output token at `percentile`, at most.")
    percentile: int = opt(99, ge=50, le=99, measures=False, help="The percentile ttft_ms and tpot_ms hold: 50, 90 "
                          "or 99.")
    min_user_tokens_per_s: Optional[float] = opt(None, gt=0, unit="tokens/s", measures=False,
                                                 help="Output tokens per second one user sees, at least.")
    max_cost_per_m_tokens: Optional[float] = opt(None, gt=0, measures=False, help="Cost per million output tokens, "
                                                 "at most (needs hardware.cost_per_hour).")
    max_accuracy_drop: Optional[float] = opt(None, gt=0, le=1, measures=False, help="Accuracy at most this far below "
                                             "its reference, where accuracy was measured.")


def validate_target(target: TargetConfig) -> None:
    if target.percentile not in TARGET_PERCENTILES:
        raise UserError(f"target.percentile: {target.percentile} is not one of "
                        f"{', '.join(map(str, TARGET_PERCENTILES))} (the percentiles results.csv holds)")


# --- tracking: the experiment trackers a sweep is also sent to (harness/track/; docs/guides/tracking.md). None by
# default. Credentials come from each tracker's own environment variables (MLFLOW_TRACKING_TOKEN, or
# MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD; WANDB_API_KEY), never from the YAML, which is copied into
# every results folder.

MLFLOW_SCHEMES = ("http", "https")  # its REST API (harness/track/mlflow_rest.py): a tracking server
WANDB_MODES = ("online", "offline")
MAX_NAME = 128  # an experiment's or project's name: both trackers allow more, a folder name fewer
_WANDB_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # W&B's projects and entities: no slashes, spaces or #?%:


@dataclass
class MlflowConfig:
    tracking_uri: str = opt(help="The MLflow tracking server, http://HOST:PORT (or https://).")
    experiment: Optional[str] = opt(None, help="The experiment the sweep's run goes in, made if missing; default: "
                                    "benchmark_name.")


@dataclass
class WandbConfig:
    project: Optional[str] = opt(None, help="The W&B project; default: benchmark_name.")
    entity: Optional[str] = opt(None, help="The W&B team or user; default: the API key's own.")
    mode: str = opt("online", help="online (sent as the sweep runs; WANDB_API_KEY from the environment) | offline "
                    "(written under the results folder's wandb/, for `wandb sync` later).")


@dataclass
class TrackingConfig:
    mlflow: Optional[MlflowConfig] = opt(None, help="Send the sweep to an MLflow tracking server: one run, a nested "
                                         "run per entry.")
    wandb: Optional[WandbConfig] = opt(None, help="Send the sweep to Weights & Biases: one run per entry, grouped by "
                                       "the sweep, and one for the sweep's files.")

    @property
    def any(self) -> bool:
        return self.mlflow is not None or self.wandb is not None


def validate_tracking(tracking: TrackingConfig) -> None:
    if tracking.wandb is not None and importlib.util.find_spec("wandb") is None:  # MLflow's is the harness's own
        raise UserError("tracking.wandb: W&B's client is not installed here: pip install -r requirements-tracking.txt")
    if tracking.mlflow is not None:
        _validate_mlflow(tracking.mlflow)
    if tracking.wandb is not None:
        w = tracking.wandb
        if w.mode not in WANDB_MODES:
            raise UserError(f"tracking.wandb.mode: {w.mode!r} is not one of {', '.join(WANDB_MODES)}")
        for name in ("project", "entity"):
            value = getattr(w, name)
            if value is not None and (not _WANDB_NAME.match(value) or len(value) > MAX_NAME):
                raise UserError(f"tracking.wandb.{name}: {value!r} is not a W&B name (letters, digits, '_', '-', '.'; "
                                f"at most {MAX_NAME} characters)")


def _validate_mlflow(m: MlflowConfig) -> None:
    key = "tracking.mlflow.tracking_uri"
    try:
        parts = urllib.parse.urlsplit(m.tracking_uri)
        parts.port  # noqa: B018: urllib checks the port's range when it is read
    except ValueError as e:
        raise UserError(f"{key}: {m.tracking_uri!r} is not a URL ({e})") from None
    if parts.scheme not in MLFLOW_SCHEMES:
        raise UserError(f"{key}: {m.tracking_uri!r} is not an http:// or https:// URL (an MLflow tracking server)")
    if not parts.hostname:
        raise UserError(f"{key}: {m.tracking_uri!r} names no host (http://HOST:PORT)")
    if parts.password is not None or parts.username is not None:
        raise UserError(f"{key}: holds credentials, and the YAML is copied into every results folder; give them in "
                        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)")
    if m.experiment is not None and (not m.experiment.strip() or len(m.experiment) > MAX_NAME
                                     or not m.experiment.isprintable()):
        raise UserError(f"tracking.mlflow.experiment: {m.experiment!r} is not an experiment's name (1 to {MAX_NAME} "
                        "printable characters)")

"""The options every backend entry accepts (`backends[]`): each engine subclasses `BackendOptions` with its own
typed keys (backends/<engine>.py, `Options`). Here, below the plan, so that the library's types name them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional

from harness.config.accuracy import AccuracyConfig
from harness.config.speculative import SpeculativeConfig
from harness.errors import UserError
from harness.fields import opt


LORA_MIXES = ("uniform", "zipf", "trace")
LORA_LOADS = ("start", "on_demand")
MAX_ADAPTERS = 256  # each a file set on disk and a slot the server may hold


@dataclass
class LoraConfig:
    """LoRA adapters made here for the sweep's model, served beside it, each request naming one drawn from `mix`
    (docs/measurement.md, "LoRA adapters")."""

    adapters: int = opt(4, ge=1, le=MAX_ADAPTERS, unit="adapters", help="How many adapters are made (random "
                        "weights, PEFT's format) and served; requests name them lora-0, lora-1, ...")
    rank: int = opt(8, ge=1, le=512, unit="", help="Each adapter's rank r (vLLM: at most --max-lora-rank).")
    target_modules: List[str] = opt(factory=lambda: ["q_proj", "v_proj"], help="The linear layers each adapter "
                                    "changes, by their last name in the model (q_proj, k_proj, v_proj, o_proj, "
                                    "gate_proj, up_proj, down_proj for Llama).")
    mix: str = opt("uniform", help="Which adapter each request names: uniform (each alike) | zipf (adapter k with "
                   "weight 1 / (k+1)^zipf_exponent, a few hot and a long tail, as SGLang's benchmark draws them) | "
                   "trace (stream.trace's adapter field or column: request i names lora-<its index>).")
    zipf_exponent: Optional[float] = opt(None, gt=0, le=10, help="With mix: zipf, its exponent (default 1.0); "
                                         "higher: more of the requests on the first adapters.")
    seed: int = opt(0, ge=0, le=2**31 - 1, help="Seeds the adapters' weights and the requests' draws.")
    load: str = opt("start", help="When the engine loads each adapter: start (every one as it starts: vLLM's "
                    "--lora-modules {lora_modules}; in process, before the first point) | on_demand (when a request "
                    "first names it: vLLM's LoRA resolver finds it in the adapters' folder, its load in that request's "
                    "TTFT).")

    def validate(self, key: str) -> None:
        for name, allowed in (("mix", LORA_MIXES), ("load", LORA_LOADS)):
            if getattr(self, name) not in allowed:
                raise UserError(f"{key}.{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if self.zipf_exponent is not None and self.mix != "zipf":
            raise UserError(f"{key}.zipf_exponent: shapes mix: zipf, and mix is {self.mix}; remove it or set mix: zipf")
        if not self.target_modules:
            raise UserError(f"{key}.target_modules: must name at least one layer, e.g. [q_proj, v_proj]")
        for i, name in enumerate(self.target_modules):
            if not isinstance(name, str) or not name.isidentifier():
                raise UserError(f"{key}.target_modules[{i}]: {name!r} is not a layer's name (e.g. q_proj)")
        if len(set(self.target_modules)) != len(self.target_modules):
            raise UserError(f"{key}.target_modules: has duplicates: {self.target_modules}")

    @property
    def exponent(self) -> float:
        return 1.0 if self.zipf_exponent is None else self.zipf_exponent


@dataclass
class BackendOptions:
    """Keys every backend entry accepts; each backend subclasses this with its own typed options."""

    name: str = opt("", help="Backend to run: a name in backends/registry.py (`--schema backends` lists each "
                    "one's keys).")
    label: Optional[str] = opt(None, help="Name of this entry in results (default: name); unique within a sweep.")
    speculative: Optional[SpeculativeConfig] = opt(
        None, help="Speculative decoding settings (method, num_speculative_tokens, ...), compared with the same "
        "engine's entry without them; a list of settings (null: none) makes one entry each (docs/measurement.md)."
    )
    quantization: str = opt("none", help="Weights as this entry loads them (none | int8 | int4 | fp8): set from "
                            "model.quantization, one entry per value.")
    grid: Dict[str, Any] = opt(
        factory=dict, help="Option -> list of values: one entry per combination, labelled by the values that vary "
        "(`vllm[max_num_seqs=64]`); nested keys dotted (`engine_args.block_size`); over 64 entries needs --yes."
    )
    grid_values: Dict[str, Any] = opt(factory=dict, help="Set from `grid`: the values this entry's combination "
                                      "varies (the grid_options column).")
    lora: Optional[LoraConfig] = opt(
        None, help="LoRA adapters made here and served beside the model, each request naming one (adapters, rank, "
        "target_modules, mix, zipf_exponent, seed); a grid over lora.adapters or lora.zipf_exponent makes them "
        "sweep axes. vllm entries, and openai entries whose command starts vLLM with {lora_modules}; streams only.")
    profile: bool = opt(False, help="After each batch point's timed batches, one more batch of the same shape, "
                        "untimed, under the engine's profiler: its Chrome trace in the results folder's profiles/ "
                        "(results.csv: profile_trace). Engines without a profiler here refuse it.")

    @property
    def entry_label(self) -> str:
        return self.label or self.name

    def cannot_profile(self) -> Optional[str]:
        """Why this engine cannot take `profile: true` (the config is refused, naming the key), or None where it
        can. Each engine that profiles says so (backends/generate/base.py: GenerateOptions)."""
        return f"{self.name} has no profiler in the harness"

    # Whether the engine asks for answers held to workload.json_schema (or calling workload.tools) and checks them
    # (the openai backend does).
    holds_answers_to_a_schema: ClassVar[bool] = False

    def cannot_serve_lora(self) -> Optional[str]:
        """Why this entry cannot serve `lora` adapters (the config is refused, naming the key), or None."""
        return (f"{self.name} serves no LoRA adapters in the harness; vllm and openai entries (a command that starts "
                "vLLM) do")

    @property
    def pools(self) -> bool:
        """Whether the entry's requests pool rather than generate (an openai entry's embeddings or rerank): no output
        tokens, so its sweep has no output_lengths (harness/config/sweep.py)."""
        return False

    def validate(self, key: str) -> None:
        """Value checks beyond types; raise UserError naming `key`.<field>. Must not load anything."""

    def resolve_paths(self, config_dir: Path) -> None:
        """Make the entry's relative file paths (an openai entry's image files) relative to the working folder: a
        path is looked for beside the YAML first, as the workload's are."""

    def validate_model(self, key: str, model) -> None:
        """Checks against the sweep's resolved model (harness/model/spec.py's ModelSpec), as the sweep plans and
        before anything starts; raise UserError naming `key`.<field>."""

    def validate_workload(self, key: str, workload) -> None:
        """Checks against the sweep's workload options (workloads/: `prompts`, and a prompt file's `template`);
        raise UserError naming `key`.<field>. Must not load anything."""


def pooling_entry(entries: List[BackendOptions], keys: List[str], accuracy: AccuracyConfig) -> Optional[str]:
    """The first entry's key when every entry pools (embeddings, rerank: the sweep has no output_lengths); None when
    none does. A sweep of both kinds is refused (their points have no output length in common), as is accuracy
    scoring of answers that are vectors and scores."""
    pooled = [entry.pools for entry in entries]
    if not any(pooled):
        return None
    pools = keys[pooled.index(True)]
    if not all(pooled):
        raise UserError(f"{pools}.endpoint: embeddings and rerank make no output tokens and cannot share a sweep with "
                        f"entries that generate ({keys[pooled.index(False)]}); give them a sweep of their own")
    if accuracy.tasks or accuracy.lm_eval_tasks:
        raise UserError(f"accuracy: scores generated answers, and embeddings and rerank answers ({pools}) are vectors "
                        "and scores; remove the accuracy section")
    return keys[0]

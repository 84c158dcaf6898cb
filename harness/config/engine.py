"""The options every backend entry accepts (`backends[]`): each engine subclasses `BackendOptions` with its own
typed keys (backends/<engine>.py, `Options`). Here, below the plan, so that the library's types name them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional

from harness.config.accuracy import AccuracyConfig
from harness.config.speculative import SpeculativeConfig
from harness.errors import UserError
from harness.fields import opt


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

    @property
    def pools(self) -> bool:
        """Whether the entry's requests pool rather than generate (an openai entry's embeddings or rerank): no output
        tokens, so its sweep has no output_lengths (harness/config/sweep.py)."""
        return False

    def validate(self, key: str) -> None:
        """Value checks beyond types; raise UserError naming `key`.<field>. Must not load anything."""

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

"""The options every backend entry accepts (`backends[]`): each engine subclasses `BackendOptions` with its own
typed keys (backends/<engine>.py, `Options`). Here, below the plan, so that the library's types name them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from harness.config.speculative import SpeculativeConfig
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

    @property
    def entry_label(self) -> str:
        return self.label or self.name

    def validate(self, key: str) -> None:
        """Value checks beyond types; raise UserError naming `key`.<field>. Must not load anything."""

    def validate_workload(self, key: str, workload) -> None:
        """Checks against the sweep's workload options (workloads/: `prompts`, and a prompt file's `template`);
        raise UserError naming `key`.<field>. Must not load anything."""

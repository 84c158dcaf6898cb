"""The workload registry: what a point asks the engine (random token ids, or a prompt file through a template).

A registry like the backends': `workload.prompts: random` picks `random`, a file path picks
`prompts`, and the chosen class's typed `Options` hold the `workload` section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Type

from harness.config.registry import Registry

if TYPE_CHECKING:  # for the table's type only: a workload's module is imported when a sweep names it
    from workloads.base import Workload


def _pick(section: Any) -> str:
    """The raw `workload` mapping or its resolved options -> the registered name."""
    prompts = section.get("prompts", "random") if isinstance(section, dict) else getattr(section, "prompts", "random")
    return "random" if prompts == "random" else "prompts"


WORKLOADS: Registry[Type[Workload]] = Registry("workload", {
    "random": "workloads.random_ids:RandomWorkload",
    "prompts": "workloads.prompts:PromptsWorkload",
}, pick=_pick)


def build_workload(config, model):
    """The sweep's workload, built from its resolved options (files read, prompts tokenized)."""
    workload = WORKLOADS.class_of(config.workload, "workload").build(config.workload, config, model)
    workload.make_prefixes(model)
    workload.check_fits(model.max_positions, model.label, config.output_lengths)
    return workload

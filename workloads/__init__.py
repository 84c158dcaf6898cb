"""Workloads: what a point asks the engine (random token ids, or a prompt file through a template).

A registry like the backends': `workload.prompts: random` picks `random`, a file path picks
`prompts` (harness.config.workload_kind), and the chosen class's typed `Options` hold the
`workload` section.
"""

from __future__ import annotations

from harness.registry import Registry

REGISTRY = Registry("workload", {
    "random": "workloads.random_ids:RandomWorkload",
    "prompts": "workloads.prompts:PromptsWorkload",
})


def build_workload(config, model):
    """The sweep's workload, built from its resolved options (files read, prompts tokenized)."""
    from harness.config import workload_kind

    cls = REGISTRY.get(workload_kind(config.workload), "workload.prompts")
    return cls.build(config.workload, config, model)

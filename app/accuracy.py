"""accuracy.tasks and accuracy.lm_eval_tasks, read once per model before any engine loads and handed to each of its
entries (docs/measurement.md, "Accuracy")."""

from __future__ import annotations

import dataclasses
from typing import List

from backends.openai_compat.lm_eval import plan_tasks as plan_lm_eval
from harness.config.sweep import SweepConfig
from harness.errors import UserError
from harness.model.spec import ModelSpec
from harness.plan.entry import EntryPlan
from workloads.tasks import load_tasks


def with_accuracy(plans: List[EntryPlan], config: SweepConfig, model: ModelSpec) -> List[EntryPlan]:
    """The model's accuracy tasks, read once (a bad line stops the sweep here), handed to each of its entries; an
    entry that runs one sequence at a time (hf's assisted generation) answers them one at a time. lm-eval's tasks
    need an entry that serves them (an openai entry's server)."""
    tasks, wanted = load_tasks(config.accuracy, model), config.accuracy.batch_size
    served = [plan for plan in plans if plan.backend_cls.serves_lm_eval and any(p.skip_reason is None
                                                                                 for p in plan.points)]
    if config.accuracy.lm_eval_tasks and not served:  # before lm-eval is asked for its task list (seconds)
        raise UserError("accuracy.lm_eval_tasks: lm-eval scores through a server, and no entry of this sweep runs "
                        "one (an openai entry in a stream sweep)")
    lm_eval = plan_lm_eval(config.accuracy, model)
    for plan in plans:
        batched = dataclasses.replace(plan.points[0].point, batch_size=wanted)
        plan.accuracy_tasks, plan.lm_eval = tasks, lm_eval
        plan.accuracy_batch_size = 1 if plan.backend_cls.point_unsupported(plan.options, batched) else wanted
    return plans

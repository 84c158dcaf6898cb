"""A name -> "module:Class" table: heavy engines are imported only when a sweep names them.

The core never imports `backends` or `workloads`: the CLI layer hands their registries down
(`load_config`, `plan_sweep`), so data flows one way and neither package can import the core back
into a cycle.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, Protocol, TypeVar

from harness.config.kinds import show
from harness.errors import UserError, known_names


class Registered(Protocol):
    """What every registered class has: its typed options (`Options`, a dataclass the config is parsed into)."""

    Options: type


R = TypeVar("R", bound=Registered)


@dataclass(frozen=True)
class Registry(Generic[R]):
    """`R`: what the registered classes are, as their users see them (harness/plan/engine.py: EngineClass for the
    backends). Classes are imported by name at run time, so that is their contract, held by each class's tests."""

    kind: str  # "backend", "workload": what an unknown-name error calls it
    table: Dict[str, str]
    # Which name a section picks when it has no `name` key (the workload section is picked by its `prompts`).
    pick: Optional[Callable[[Any], str]] = None

    def names(self) -> List[str]:
        return sorted(self.table)

    def get(self, name: str, key: str) -> R:
        """The class registered as `name`; an unknown name is a UserError at `key`, with a "did you mean"."""
        if name not in self.table:
            raise UserError(f"{key}: unknown {self.kind} {name!r}{known_names(name, self.names())}")
        module, _, cls = self.table[name].partition(":")
        return getattr(importlib.import_module(module), cls)

    def options(self, raw: Any, key: str) -> Any:
        """A raw entry -> the typed `Options` dataclass of the class it names (`raw["name"]`, or `pick(raw)`)."""
        from harness.config.loading import to_dataclass

        return to_dataclass(self.class_of(raw, key).Options, raw, key)

    def class_of(self, section: Any, key: str) -> R:
        """The class a raw section or its resolved options names."""
        if not isinstance(section, dict) and not dataclasses.is_dataclass(section):
            raise UserError(f"{key}: expected a mapping of keys, got {show(section)}")
        if self.pick is not None:
            return self.get(self.pick(section), key)
        name = section.get("name") if isinstance(section, dict) else getattr(section, "name", None)
        if name is not None and not isinstance(name, str):
            raise UserError(f"{key}.name: expected a string, one of {', '.join(self.names())}, got {show(name)}")
        if not name:
            raise UserError(f"{key}.name: required; each {self.kind} entry needs one of {', '.join(self.names())}")
        return self.get(str(name), f"{key}.name")

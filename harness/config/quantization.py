"""`model.quantization`: one value, or a list that makes one entry per value of every backend entry (docs/measurement.md,
"Quantization"), as a `speculative` list does. The unquantized entry keeps its label, each other gets `-int8`, `-int4`,
`-fp8`; every model of a `models` list must ask for the same values (they share the entries)."""

from __future__ import annotations

import copy
from typing import Any, List, Sequence, Tuple

from harness.config.sections import QUANTIZATIONS
from harness.errors import UserError, known_names


def quantizations(sections: Sequence[Tuple[str, Any]]) -> List[str]:
    """The values every model section asks for, checked; ["none"] by default."""
    lists = [(key, _values(section.quantization, f"{key}.quantization")) for key, section in sections]
    if not lists:
        return ["none"]  # `models: []`: validation names that
    first_key, first = lists[0]
    for key, values in lists[1:]:
        if values != first:
            raise UserError(f"{key}.quantization: {values} differs from {first_key}'s {first}; quantization makes "
                            "backend entries, which every model of the sweep shares")
    return first


def _values(raw: Any, key: str) -> List[str]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise UserError(f"{key}: an empty list; give none, int8, int4 or fp8, or a list of them")
    for value in values:
        if value not in QUANTIZATIONS:
            raise UserError(f"{key}: unknown quantization {value!r}" + known_names(str(value), list(QUANTIZATIONS)))
    if len(set(values)) != len(values):
        raise UserError(f"{key}: has duplicates: {values}")
    return list(values)


def expand_quantization(entries: List[Tuple[str, str, Any]], values: List[str]) -> List[Tuple[str, str, Any]]:
    """Each (YAML key, speculative key, raw entry) once per value, the entry's `quantization` set, its label tagged."""
    if values == ["none"]:
        return entries
    out = []
    for key, spec_key, entry in entries:
        for value in values:
            expanded = copy.deepcopy(entry) if isinstance(entry, dict) else entry
            if isinstance(expanded, dict):
                expanded["quantization"] = value
                if value != "none":
                    expanded["label"] = f"{expanded.get('label') or expanded.get('name')}-{value}"
            out.append((key, spec_key, expanded))
    return out

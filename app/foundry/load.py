"""The CLI's side of llm-foundry YAMLs: recognise one, print its translation (app/foundry/translate.py), check
that it loads, and hand the mapping to `load_config`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Optional


from app.foundry.translate import FOUNDRY_KEYS, is_foundry, render, translate
from harness.config.loading import read_yaml_mapping
from harness.config.yaml_text import load_yaml
from harness.errors import UserError


def is_foundry_file(path: str) -> bool:
    return is_foundry(read_yaml_mapping(Path(path)))


def translate_for_cli(path: str, overrides: List[str], translate_only: bool) -> Optional[Dict[str, Any]]:
    """Print the translation of an llm-foundry YAML and return the translated mapping to load (as if it were the
    file's own: workload paths resolve against its folder), or None with --translate-only (the printed YAML checked
    to load first).

    stdout carries only a command's product: with --translate-only that is the translation (redirect it into a
    file to get a harness YAML); for a run it goes to stderr, so that `--mcli` still prints exactly the runs it
    would submit."""
    source = Path(path)
    raw = read_yaml_mapping(source)
    if not is_foundry(raw):
        raise UserError(f"--translate-only: {path} is not an llm-foundry inference-benchmark YAML (it has none of "
                        f"model.name, {', '.join(FOUNDRY_KEYS)}, or it has keys of this harness's own schema)")
    if translate_only and overrides:
        raise UserError(f"--translate-only: prints the file's translation, without key=value overrides "
                        f"({overrides[0]}); give them when running the translated YAML")
    translated, lines = translate(raw, source.name)
    text = render(translated, lines, str(path))
    if translate_only:
        _check_loads(source, load_yaml(text, str(path)))
    print(text, file=sys.stdout if translate_only else sys.stderr, flush=True)  # not rich: its markup eats [lists]
    return None if translate_only else translated


def _check_loads(source: Path, translated: Dict[str, Any]) -> None:
    """`--translate-only` promises a valid harness YAML: the printed text, read back, loads as a run would load it
    (no model is loaded)."""
    from backends.registry import BACKENDS
    from harness.config.sweep import load_config
    from workloads.registry import WORKLOADS

    load_config(source, [], BACKENDS, WORKLOADS, raw=translated)

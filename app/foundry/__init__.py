"""llm-foundry inference-benchmark YAMLs, run unchanged: translated (translate.py, mpt.py), then loaded (load.py)."""

from app.foundry.load import is_foundry_file, translate_for_cli
from app.foundry.translate import is_foundry, render, translate

__all__ = ["is_foundry", "is_foundry_file", "render", "translate", "translate_for_cli"]

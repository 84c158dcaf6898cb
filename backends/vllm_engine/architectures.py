"""Which architectures the installed vLLM has dropped, read from its model registry's source without importing it:
planning (`--plan`, `--dry-run`) runs in the parent, where `import vllm` would cost seconds (and torch) for one
table."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from pathlib import Path
from typing import Dict, Optional, Tuple

from harness.model.spec import ModelSpec


def removed_architecture(model: ModelSpec) -> Optional[str]:
    """Why the installed vLLM cannot run `model`'s architecture, where vLLM itself lists it as removed (its model
    registry's _PREVIOUSLY_SUPPORTED_MODELS, e.g. MptForCausalLM after 0.28), or None."""
    removed, version = _vllm_removed_models()
    for arch in getattr(model.config, "architectures", None) or ():
        if arch in removed:
            return f"vLLM {version} does not run {arch} (last supported in vLLM {removed[arch]})"
    return None


@functools.lru_cache(maxsize=1)
def _vllm_removed_models() -> Tuple[Dict[str, str], str]:
    """(architecture -> the last vLLM version that ran it, the installed version); nothing where vLLM is not
    installed or its files are not laid out as in 0.32 (the engine then says what it cannot run)."""
    try:
        spec = importlib.util.find_spec("vllm")  # locates the package without running it
        if spec is None or spec.origin is None:  # not installed, or not from files
            return {}, ""
        root = Path(spec.origin).parent
        source = (root / "model_executor" / "models" / "registry.py").read_text()
        start = source.index("\n_PREVIOUSLY_SUPPORTED_MODELS = {") + len("\n_PREVIOUSLY_SUPPORTED_MODELS = ")
        removed = ast.literal_eval(source[start:source.index("\n}", start) + 2])
        version = re.search(r"__version__ = version = '([^']+)'", (root / "_version.py").read_text())
        return dict(removed), version.group(1) if version else "(installed)"
    except (AttributeError, TypeError, OSError, ValueError, SyntaxError):
        return {}, ""

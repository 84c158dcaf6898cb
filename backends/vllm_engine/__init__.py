"""The `vllm` backend: the registered engine (engine.py: the offline `vllm.LLM` for batches, the async engine of
stream.py for request streams) and what it keeps beside it: its options, its quantization and speculative-decoding
mappings, and the architectures vLLM no longer runs.

Named vllm_engine, not vllm, so that nothing can shadow the `vllm` package.
"""

from backends.vllm_engine.engine import VLLMBackend
from backends.vllm_engine.options import VLLMOptions

__all__ = ["VLLMBackend", "VLLMOptions"]

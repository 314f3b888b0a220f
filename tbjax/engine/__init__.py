"""The embedded JAX inference engine: continuous batching over a KV cache, SGLang-compatible semantics."""

from tbjax.engine.engine import JaxEngine

__all__ = ["JaxEngine"]

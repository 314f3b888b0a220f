"""The embedded JAX inference engine (jax_engine.JaxEngine): continuous batching over a KV cache, with
SGLang's semantics, and its SGLang-compatible HTTP server. Importing the package loads nothing: the HTTP
command parses its arguments before JAX starts."""

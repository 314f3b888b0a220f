"""What the publish and load tests share: a tiny Qwen3 built in code, a nudge of a few of its elements (a step
whose other updates rounded away), and a count of the programs XLA compiles."""

from collections.abc import Callable

import jax
from flax import nnx

from tbjax.models import ModelConfig, Qwen
from tbjax.models.hf import exporter

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


def tiny_model() -> Qwen:
    return Qwen(ModelConfig.from_hf_dict({
        "model_type": "qwen3", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "tie_word_embeddings": False,
        "rope_theta": 1e6, "rms_norm_eps": 1e-6, "max_position_embeddings": 64, "dtype": "float32"}), nnx.Rngs(0))


def nudge(model: Qwen, amount: float) -> None:
    """Changes three elements of two parameters."""
    up = model.layers[0].mlp.up_proj.kernel
    up.set_value(up.get_value().at[3, 5].add(amount).at[7, 1].add(-amount))
    norm = model.norm.weight
    norm.set_value(norm.get_value().at[0].add(amount))


def count_compiles(run: Callable[[], object]) -> int:
    """How many programs XLA compiles while `run()` runs, from a cold start."""
    jax.clear_caches()
    exporter._gather_program.cache_clear()
    compiles = []

    def listen(event: str, _duration: float, **_: object) -> None:
        if event == BACKEND_COMPILE:
            compiles.append(event)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        run()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return len(compiles)

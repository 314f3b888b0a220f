"""What the CPU benchmarks share: the ~50M-parameter Qwen3 they all time, and interleaved medians.

Kept free of heavy imports (no torch, no JAX) so that a benchmark's peak RSS is its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

# 48.2M parameters: big enough that matmuls dominate, small enough for a 2-core CPU.
CONFIG = {
    "model_type": "qwen3", "vocab_size": 32768, "hidden_size": 512, "intermediate_size": 1536,
    "num_hidden_layers": 10, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
    "tie_word_embeddings": True, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
}


def median_seconds(steps: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median step time of each contender, measured in alternation so that load from other processes on
    the machine falls on both sides alike."""
    for step in steps.values():  # compile / warm up
        step()
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}

"""The embedded engine as a run's `rollout` section configures it: one place for GRPO's rollouts, the
pipeline's selection and evaluation, and any script that serves a policy in-process."""

from __future__ import annotations

from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import Qwen
from tbjax.sections.rollout import RolloutSection


def embedded_engine(model: Qwen, rollout: RolloutSection, weight_version: str) -> JaxEngine:
    """A JaxEngine over `model` with the section's slots, sequence length, prefill chunk, decode steps and
    determinism, reporting `weight_version`."""
    return JaxEngine(model, slots=rollout.slots, max_len=rollout.max_len, weight_version=weight_version,
                     prefill_chunk=rollout.prefill_chunk, deterministic=rollout.deterministic,
                     decode_steps=rollout.decode_steps)

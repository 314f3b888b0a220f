"""The embedded engine as a run's `rollout` section configures it: one place for GRPO's rollouts, the
pipeline's selection and evaluation, `tbjax.serve --run-config`, and any script that serves a policy in-process."""

from __future__ import annotations

from typing import Any

from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import Qwen
from tbjax.sections.rollout import RolloutSection


def engine_settings(rollout: RolloutSection) -> dict[str, Any]:
    """JaxEngine's keyword arguments that the section sets: slots, sequence length, prefill chunk, decode steps
    and determinism."""
    return {"slots": rollout.slots, "max_len": rollout.max_len, "prefill_chunk": rollout.prefill_chunk,
            "deterministic": rollout.deterministic, "decode_steps": rollout.decode_steps}


def embedded_engine(model: Qwen, rollout: RolloutSection, weight_version: str) -> JaxEngine:
    """A JaxEngine over `model` as the section configures it, reporting `weight_version`."""
    return JaxEngine(model, weight_version=weight_version, **engine_settings(rollout))

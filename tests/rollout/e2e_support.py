"""Shared pieces of the end-to-end rollout tests: a tiny policy, telecom tasks, trajectory checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs import load_tasks
from rollout.episode import EpisodeConfig
from rollout.trajectory import Trajectory

# Short turns keep the tiny random policy's episodes to a few turns within a ~3k-token prompt.
EPISODE = EpisodeConfig(max_turns=3, max_tokens_per_turn=24, token_budget=4000, timeout_s=120)


def telecom_tasks(n: int):
    return load_tasks(domain="telecom", split="train")[:n]


def recomputed_logprobs(model, trajectory: Trajectory, temperature: float = 1.0) -> np.ndarray:
    """The trainer's view: log_softmax(logits / T) of the whole trajectory at each sampled token."""
    ids = jnp.asarray([trajectory.token_ids], jnp.int32)
    logits = model(ids)[0, :-1] / temperature
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    picked = np.asarray(logprobs)[np.arange(len(trajectory.token_ids) - 1), trajectory.token_ids[1:]]
    mask = np.asarray(trajectory.loss_mask[1:], bool)
    return picked[mask]


def check_trajectory(trajectory: Trajectory, model, interpreter) -> None:
    """Invariants every scored trajectory must hold."""
    assert trajectory.reward in (0.0, 1.0) and trajectory.system_error is None
    assert trajectory.termination in ("user_done", "agent_done", "max_turns", "token_budget")
    mask = np.asarray(trajectory.loss_mask)
    assert mask[: trajectory.prompt_tokens].sum() == 0 and mask.sum() == trajectory.completion_tokens > 0
    assert len(trajectory.weight_versions) == trajectory.turns >= 1
    sampled = np.asarray(trajectory.logprobs)[mask.astype(bool)]
    np.testing.assert_allclose(sampled, recomputed_logprobs(model, trajectory), atol=1e-4)
    text = interpreter.decode(trajectory.token_ids[: trajectory.prompt_tokens])
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")

"""The GRPO objective in one place, as pure functions (no model, no I/O): advantages, token weights, the
loss terms of a micro-batch and the step's metrics.

Advantages: per group, (r - mean) / (std + eps) with the population std (ddof=0, eps=1e-6), or only
r - mean (Dr. GRPO, `normalize_std=False`). Every trained token of an episode carries its episode's advantage.

Policy loss per token: the clipped ratio objective with separate low/high clip ranges (0.2 / 0.28) and an
optional dual clip for negative advantages, optionally weighted by truncated importance sampling (the
trainer's old log-probs over the rollout engine's behaviour log-probs, capped), plus an optional KL
penalty to a frozen reference, estimated per sampled token by k1 (log pi - log ref, whose gradient is that of
log pi) or k3 (ref/pi - log(ref/pi) - 1, never negative). Aggregation is a per-token weight and one batch-level
denominator:

    loss = sum(term * weight * mask) / denominator

token-mean: weight 1, denominator = trained tokens in the batch; seq-mean-token-mean: weight 1/len(episode),
denominator = episodes; seq-mean-token-sum-norm: weight 1/norm_length, denominator = episodes. Losses return
the numerator only: micro-batches add their numerators and gradients, and one division by the batch's
denominator gives exactly the full-batch gradient, however the batch was split.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from tbjax.sections.training import GRPOSection, KLEstimator

# Per-token float32 log-probs the trainer adds to a packed batch before an update's first optimizer step
# (tbjax.trainer.update), laid out like its other fields: the pre-update policy's ("old", the ratio's
# denominator) and the KL reference's.
OLD_LOGPROBS = "old_logprobs"
REF_LOGPROBS = "ref_logprobs"


def group_advantages(rewards: np.ndarray, normalize_std: bool = True, eps: float = 1e-6) -> np.ndarray:
    """rewards [groups, group_size] -> advantages of the same shape (population std, ddof=0)."""
    rewards = np.asarray(rewards, np.float64)
    centered = rewards - rewards.mean(axis=1, keepdims=True)
    if normalize_std:
        centered = centered / (rewards.std(axis=1, ddof=0, keepdims=True) + eps)
    return centered.astype(np.float32)


def episode_advantages(groups: Sequence[Sequence[float]], config: GRPOSection) -> np.ndarray:
    """Every episode's advantage, group after group, from each group's rewards (groups may differ in size)."""
    if not groups:
        return np.zeros(0, np.float32)
    return np.concatenate([group_advantages(np.asarray([rewards]), config.normalize_std, config.advantage_eps)[0]
                           for rewards in groups])


def token_weights(lengths: np.ndarray, config: GRPOSection) -> tuple[np.ndarray, float]:
    """Per-episode token weight and the batch denominator for the configured aggregation.

    lengths: [episodes] trained-token counts. Returns (weight per episode [episodes], denominator).
    """
    lengths = np.asarray(lengths, np.float64)
    episodes = float(np.count_nonzero(lengths))
    if config.aggregation == "token_mean":
        return np.ones_like(lengths, np.float32), float(lengths.sum())
    if config.aggregation == "seq_mean_token_mean":
        return np.where(lengths > 0, 1.0 / np.maximum(lengths, 1), 0.0).astype(np.float32), episodes
    if config.aggregation == "seq_mean_token_sum_norm":
        return np.full_like(lengths, 1.0 / config.norm_length, dtype=np.float32), episodes
    raise ValueError(f"unknown loss aggregation {config.aggregation!r}")


def policy_loss_terms(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    behaviour_logprobs: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    weights: jax.Array,
    config: GRPOSection,
    ref_logprobs: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Per-token arrays of any (same) shape -> sums over the batch slice: `loss` (the numerator) and metric
    numerators (`clipped`, `tis_truncated`, `kl`, `ratio`), all over trained tokens (mask 1)."""
    mask = mask.astype(jnp.float32)
    ratio = jnp.exp(logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped_ratio = jnp.clip(ratio, 1.0 - config.clip_low, 1.0 + config.clip_high)
    term = jnp.maximum(unclipped, -advantages * clipped_ratio)
    if config.dual_clip is not None:
        term = jnp.where(advantages < 0, jnp.minimum(term, -advantages * config.dual_clip), term)
    tis = jnp.ones_like(ratio)
    if config.tis_cap is not None:
        # behaviour log-probs can be NaN where a server dropped one: those tokens get weight 1
        raw = jnp.exp(jax.lax.stop_gradient(old_logprobs) - behaviour_logprobs)
        capped = jnp.minimum(raw, config.tis_cap) if config.tis_mode == "truncate" else \
            jnp.where(raw <= config.tis_cap, raw, 0.0)
        tis = jnp.where(jnp.isnan(raw), 1.0, capped)
        term = term * tis
    kl = jnp.zeros_like(term)
    if config.uses_reference:
        if ref_logprobs is None:
            raise ValueError("grpo.kl_coef > 0 needs the reference policy's log-probs (ref_logprobs)")
        kl = kl_estimate(logprobs, ref_logprobs, config.kl_estimator or "k3")
        term = term + config.kl_coef * kl
    weighted = mask * weights
    was_clipped = (ratio < 1.0 - config.clip_low) | (ratio > 1.0 + config.clip_high)
    return {
        "loss": jnp.sum(term * weighted),
        "clipped": jnp.sum(was_clipped * mask),
        "tis_truncated": jnp.sum((tis < jnp.exp(old_logprobs - behaviour_logprobs)) * mask),
        "tis_weight": jnp.sum(tis * mask),
        "kl": jnp.sum(kl * mask),
        "ratio": jnp.sum(ratio * mask),
        "tokens": jnp.sum(mask),
    }


def loss_terms(logprobs: jax.Array, entropy: jax.Array, micro: dict[str, jax.Array],
               config: GRPOSection) -> dict[str, jax.Array]:
    """The loss numerator and the metric sums of one micro-batch from its trained log-probs and entropies. The
    ratio's old log-probs are the micro-batch's OLD_LOGPROBS where the update computed them, else the current
    ones under stop-gradient (ratio 1); REF_LOGPROBS, where present, feed the KL term."""
    behaviour = micro["behaviour_logprobs"]
    current = jax.lax.stop_gradient(logprobs)
    old = micro.get(OLD_LOGPROBS, current)
    terms = policy_loss_terms(logprobs, old, behaviour, micro["advantages"], micro["mask"], micro["weights"], config,
                              micro.get(REF_LOGPROBS))
    mask = micro["mask"].astype(jnp.float32)
    gap = jnp.where(jnp.isnan(behaviour), 0.0, jnp.abs(old - behaviour))
    terms["nll"] = -jnp.sum(current * mask)
    terms["entropy"] = jnp.sum(entropy * mask)
    terms["logprob_gap"] = jnp.sum(gap * mask)
    return terms


def kl_estimate(logprobs: jax.Array, ref_logprobs: jax.Array, estimator: KLEstimator) -> jax.Array:
    """Per-token estimate of KL(pi || ref) from the sampled tokens' log-probs: k1 = log pi - log ref (unbiased,
    either sign per token), k3 = ref/pi - log(ref/pi) - 1 (unbiased on tokens pi sampled, never negative)."""
    if estimator == "k1":
        return logprobs - ref_logprobs
    log_ratio = ref_logprobs - logprobs
    return jnp.exp(log_ratio) - log_ratio - 1.0


def step_metrics(sums: dict[str, np.ndarray], denominator: float) -> dict[str, float]:
    """Sums over trained tokens -> the step's metrics."""
    tokens = max(float(sums["tokens"]), 1.0)
    return {
        "loss": float(sums["loss"]) / max(denominator, 1e-12),
        "grad_norm": float(sums["grad_norm"]),
        "clip_fraction": float(sums["clipped"]) / tokens,
        "tis_truncated_fraction": float(sums["tis_truncated"]) / tokens,
        "tis_weight_mean": float(sums["tis_weight"]) / tokens,
        "nll": float(sums["nll"]) / tokens,  # mean negative log-likelihood of the trained tokens
        "entropy": float(sums["entropy"]) / tokens,
        "logprob_gap": float(sums["logprob_gap"]) / tokens,
        "kl": float(sums["kl"]) / tokens,
        "trained_tokens": float(sums["tokens"]),
    }

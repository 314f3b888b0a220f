"""Engine-vs-trainer log-prob mismatch over a step's trained tokens, and an alarm on it.

The engine reports the behaviour log-prob of every token it samples; the trainer recomputes the same tokens'
log-probs under the same parameters (before its update). They should agree up to numerics; a gap that grows
over training means the engine samples from something else than the policy being trained (weights that did
not arrive, a kernel or dtype difference), which truncated importance sampling can only partly correct.
Per step, over trained tokens (loss mask on) whose behaviour log-prob is known (a NaN one, a stop token a
server trimmed with its log-prob, is left out) and, in a batch trained beside the rollouts, that were sampled
under the weights the update starts from (packing.STALE: a stale token differs by the policy's change, which is
no failed publish; `logprob_gap_max_stale` and `mismatch_kl_stale` report those apart):

- `logprob_gap`: mean |engine - trainer|; the update's own sum (tbjax.trainer.update), no extra cost;
- `logprob_gap_max`: max |engine - trainer|;
- `mismatch_kl`: KL(behaviour || trainer) by the k3 estimator, mean over tokens of r - 1 - log r with
  r = p_trainer / p_engine = exp(trainer - engine): every term is >= 0 and their mean is unbiased for the
  KL, since the tokens were sampled from the behaviour policy (k1, the mean of engine - trainer, is
  unbiased too but its terms have either sign; k3's variance is lower).

The last two need the trainer's per-token log-probs. An update of several optimizer steps computes them
anyway, before its first step (the old log-probs of its ratio, GRPOTrainer.prepare), and `MismatchMeter`
reads those; with one step it runs one forward pass over the batch without gradient (train.mismatch_stats:
a fraction of what the update's own forward and backward passes cost, which a run that does not watch the
mismatch can save). `MismatchAlarm` compares one
of the three with train.mismatch_alarm each step and warns, or fails the step (train.mismatch_action).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import jax
import jax.numpy as jnp

from tbjax.sections.training import MismatchAction, MismatchMetric
from tbjax.trainer.objective import OLD_LOGPROBS
from tbjax.trainer.packing import STALE
from tbjax.trainer.teacher_forced import TEACHER_FORCED_FIELDS, batch_on_mesh, replicated, trainer_logprobs
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer, PreparedBatch

log = logging.getLogger(__name__)
MEASURED_FIELDS = (*TEACHER_FORCED_FIELDS, "mask", "behaviour_logprobs")


class MismatchError(RuntimeError):
    """The engine-vs-trainer mismatch crossed its alarm with train.mismatch_action=fail."""


def mismatch_sums(trainer: jax.Array, behaviour: jax.Array, mask: jax.Array,
                  stale: jax.Array | None = None) -> dict[str, jax.Array]:
    """Per-token log-probs [...] and the loss mask (and STALE, where the batch has it) -> the sums and the max the
    step's metrics come from (`*_stale`: over the stale tokens)."""
    valid = (mask != 0) & ~jnp.isnan(behaviour)
    if stale is None:
        return _gap_sums(trainer, behaviour, valid)
    fresh = _gap_sums(trainer, behaviour, valid & (stale == 0))
    return {**fresh, **{f"{k}_stale": v for k, v in _gap_sums(trainer, behaviour, valid & (stale != 0)).items()}}


def _gap_sums(trainer: jax.Array, behaviour: jax.Array, valid: jax.Array) -> dict[str, jax.Array]:
    log_ratio = jnp.where(valid, trainer - behaviour, 0.0)  # log p_trainer / p_engine
    return {"gap_max": jnp.max(jnp.abs(log_ratio), initial=0.0),
            "k3": jnp.sum(jnp.expm1(log_ratio) - log_ratio),  # 0 where not valid
            "tokens": jnp.sum(valid, dtype=jnp.float32)}


class MismatchMeter:
    """The max gap and the mismatch KL of a step's batch under `params` (the parameters that sampled it)."""

    def __init__(self, trainer: GRPOTrainer) -> None:
        self.trainer = trainer
        self._measure = jax.jit(self._sums, out_shardings=replicated(trainer))
        self._compare = jax.jit(mismatch_sums, out_shardings=replicated(trainer))

    def __call__(self, params: Params, batch: PreparedBatch) -> dict[str, float]:
        """`batch` as GRPOTrainer.prepare gave it: its mini-batches' OLD_LOGPROBS, where prepare computed them
        under `params`, are the trainer's side, else a forward pass gives it."""
        sums = []
        for part in batch.mini_batches:
            stale = (STALE,) if STALE in part.arrays else ()
            if OLD_LOGPROBS in part.arrays:
                known = batch_on_mesh(self.trainer, {k: part.arrays[k] for k in ("behaviour_logprobs", "mask", *stale)})
                sums.append(self._compare(part.arrays[OLD_LOGPROBS], known["behaviour_logprobs"], known["mask"],
                                          known.get(STALE)))
            else:
                arrays = batch_on_mesh(self.trainer, {k: part.arrays[k] for k in (*MEASURED_FIELDS, *stale)})
                sums.append(self._measure(params, self.trainer.frozen, arrays))
        sums = jax.device_get(sums)
        metrics = _metrics(sums, "")
        if "tokens_stale" in sums[0]:
            metrics |= {f"{k}_stale": v for k, v in _metrics(sums, "_stale").items()}
        return metrics

    def _sums(self, params: Params, frozen: Params, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Scans the micro-batches (one forward pass at a time, as the update does)."""
        def micro_batch(carry: dict[str, jax.Array], micro: dict[str, jax.Array]):
            logprobs = trainer_logprobs(self.trainer, params, frozen, micro, self.trainer.temperature)
            sums = mismatch_sums(logprobs, micro["behaviour_logprobs"], micro["mask"], micro.get(STALE))
            return {k: jnp.maximum(carry[k], v) if k.startswith("gap_max") else carry[k] + v
                    for k, v in sums.items()}, None

        suffixes = ("", "_stale") if STALE in batch else ("",)
        zeros = {f"{k}{suffix}": jnp.float32(0.0) for k in ("gap_max", "k3", "tokens") for suffix in suffixes}
        return jax.lax.scan(micro_batch, zeros, batch)[0]


def _metrics(sums: list[dict[str, Any]], suffix: str) -> dict[str, float]:
    """The parts' sums (those ending in `suffix`) -> the max gap and the mismatch KL over their tokens."""
    tokens = sum(float(s[f"tokens{suffix}"]) for s in sums)
    return {"logprob_gap_max": max(float(s[f"gap_max{suffix}"]) for s in sums),
            "mismatch_kl": sum(float(s[f"k3{suffix}"]) for s in sums) / max(tokens, 1.0)}


@dataclasses.dataclass(frozen=True)
class MismatchAlarm:
    """Fires when the step's `metric` exceeds `threshold`: a warning naming the step and the values, and
    with action "fail" a MismatchError (raised before the step is checkpointed or published)."""

    threshold: float
    metric: MismatchMetric = "mismatch_kl"
    action: MismatchAction = "warn"

    def check(self, metrics: dict[str, Any], step: int) -> bool:
        """Whether the alarm fires for this step's metrics (raising with action "fail")."""
        value = metrics.get(self.metric)
        if value is None or not value > self.threshold:
            return False
        values = ", ".join(f"{k} {metrics[k]:.3g}" for k in ("logprob_gap", "logprob_gap_max", "mismatch_kl")
                           if metrics.get(k) is not None)
        message = (f"step {step}: engine/trainer log-prob mismatch {self.metric} {value:.3g} is over the alarm "
                   f"{self.threshold:.3g} ({values}): the engine samples from something else than the trained "
                   "policy (stale or corrupted weights, numerics); see tbjax.trainer.mismatch")
        if self.action == "fail":
            raise MismatchError(message)
        log.warning(message)
        return True

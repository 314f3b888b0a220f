"""Batches produced ahead of the update (rollout.max_staleness > 0), as the loop sees them: which weights sample
each batch in exact mode (`pinned_step`), the steps where exact mode drains (`drains`: checkpoints and
scorings, which must see the step's own weights), and what a step's record adds about them
(`overlap_record`)."""

from __future__ import annotations

from typing import Any

from envs import Task
from rollout.batch_producer import ConsumedBatch
from tbjax.trainer.run_setup import Run


def pinned_step(run: Run, first: int, index: int) -> int:
    """Exact mode: the step whose weights sample batch `index` (of a run started at step `first`): max_staleness
    steps before, or the latest drain point (the start, a checkpoint, a validation) where that is newer. A run
    resumed from a checkpoint then samples every batch under the weights the uninterrupted run did."""
    lag = max(first, index - run.config.rollout.max_staleness)
    return max([step for step in range(lag + 1, index + 1) if drains(run, step)], default=lag)


def drains(run: Run, step: int) -> bool:
    """Whether exact mode drains at `step`: no batch is in flight when its checkpoint is written, and its
    validation scores step `step`'s weights."""
    return run.periodic.drains(step)


def overlap_record(consumed: ConsumedBatch[Task], engines_busy_s: float, step_s: float) -> dict[str, Any]:
    """What a step's record adds when batches are produced ahead: the consumed episodes by staleness, the
    groups dropped as too stale, the prompt tokens prefilled again because a publish emptied the cache that
    held them, the groups sampled again after a resume, and the fractions of the step the trainer waited for
    its batch and no batch was being produced."""
    episodes = [t for g in consumed.batch.scored for t in g.trajectories]
    return {"staleness": {str(k): n for k, n in consumed.staleness.items()}, "groups_too_stale": consumed.too_old,
            "tokens_reprefilled": sum(t.reprefilled_tokens for t in episodes),
            "groups_replayed": len(consumed.batch.scored) if consumed.replayed else 0,
            "trainer_idle_fraction": consumed.waited_s / step_s if step_s else 0.0,
            "engine_idle_fraction": max(0.0, 1.0 - engines_busy_s / step_s) if step_s else 0.0}

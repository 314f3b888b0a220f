"""The run's periodic work, each declared once with how often it runs, and the one place that says what is due.

Three kinds of work recur during GRPO besides the step's record (written every step): a checkpoint
(train.checkpoint_every), a validation of the served policy (validation.every, from the start on) and a scoring
of held-out tasks (evaluate.every, after the start, which the base policy's evaluation scores). Every kind is due
at the run's last step too. All three must see the step's own weights and state, so exact asynchronous mode
drains wherever one is due (tbjax.trainer.produced_ahead). The loop asks `Periodic.due` once per step; the work
itself lives with its owner (tbjax.trainer.checkpoint, tbjax.trainer.validation).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from tbjax.config import Config

Work = Literal["checkpoint", "validation", "heldout"]


@dataclasses.dataclass(frozen=True)
class Every:
    """When one kind of work is due: at each multiple of `steps` from step `first` on, and at the last step."""

    steps: int
    first: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"periodic work runs every {self.steps} steps: give a positive interval")

    def due(self, step: int, last: bool) -> bool:
        return step >= self.first and (step % self.steps == 0 or last)


@dataclasses.dataclass(frozen=True)
class Periodic:
    """The run's periodic work and how often each runs (None: the run does no such work)."""

    checkpoint: Every
    validation: Every | None = None
    heldout: Every | None = None
    last_step: int = 0  # the run's last step (train.steps)

    @classmethod
    def of(cls, config: Config) -> Periodic:
        """What `config` declares: checkpoints always, a validation with validation.tasks, held-out scorings
        with evaluate.every."""
        return cls(checkpoint=Every(config.train.checkpoint_every),
                   validation=Every(config.validation.every) if config.validation.tasks else None,
                   heldout=Every(config.evaluate.every, first=1) if config.evaluate.every else None,
                   last_step=config.train.steps)

    def due(self, step: int) -> frozenset[Work]:
        """The work due at `step` (0: the start, before any update)."""
        last = step == self.last_step
        declared: dict[Work, Every | None] = {"checkpoint": self.checkpoint if step else None,
                                              "validation": self.validation, "heldout": self.heldout}
        return frozenset(work for work, every in declared.items() if every is not None and every.due(step, last))

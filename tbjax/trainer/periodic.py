"""The run's periodic work, each declared once with how often it runs, and the one place that says what is due.

Four kinds of work recur during GRPO: a checkpoint (train.checkpoint_every), a validation of the served policy
(validation.every, from the start on), a scoring of held-out tasks (evaluate.every, after the start, which the
base policy's evaluation scores) and the step's record in the metrics log (every step). Every kind is due at the
run's last step too. The first three must see the step's own weights and state, so exact asynchronous mode drains
wherever one of them is due (`drains`, tbjax.trainer.produced_ahead). The loop asks `Periodic.due` once per step;
the work itself lives with its owner (tbjax.trainer.checkpoint, tbjax.trainer.validation, tbjax.trainer.metrics_log).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from tbjax.config import Config

Work = Literal["checkpoint", "validation", "heldout", "log"]
DRAINING: frozenset[Work] = frozenset({"checkpoint", "validation", "heldout"})  # what must see the step's own weights


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
    log: Every = Every(1)  # the step's record
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
        after_update = step > 0  # a checkpoint and a record follow an update
        declared: dict[Work, Every | None] = {"checkpoint": self.checkpoint if after_update else None,
                                              "validation": self.validation, "heldout": self.heldout,
                                              "log": self.log if after_update else None}
        return frozenset(work for work, every in declared.items() if every is not None and every.due(step, last))

    def drains(self, step: int) -> bool:
        """Whether work that must see step `step`'s own weights and state is due there."""
        return bool(self.due(step) & DRAINING)

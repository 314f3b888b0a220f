"""Validation during GRPO: the policy the engine serves is scored on a validation split at the start and every
`validation.every` steps, and the best-validated step is the run's export instead of whichever came last.

Why: between nearby GRPO steps a small policy's score moves by as much as a recipe change does, and late steps
can lose what earlier ones gained (fewer direct writes, more malformed calls), so the last step is one draw of a
noisy trajectory. The validation tasks are instances of the training templates carved out of the pool before
anything trains on it (`rollout.task_choice.carve`), so choosing a step on them leaves the held-out evaluation
unbiased.

The same machinery scores a fixed subset of the held-out tasks every `evaluate.every` steps (`Validation.heldout`):
a learning curve on tasks nothing trains or selects on, reported beside the others and never used to choose a
step (that would make the held-out evaluation a validation).

Every scoring is an evaluation campaign of its own under `<run>/validation/step<N>/` (rollout.evaluate's files:
trials.jsonl, summary.json, report.md), with the same tasks and the same sampling seeds at every step, so two
steps' scores differ by the policy, not the draw. The scores are read back from those files, which is how a
resumed run knows its best step; only the driver runs episodes and reads them, and every process receives the
verdict, because writing the best step's weights (`<run>/validated/v<N>`) is collective.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from envs import Task
from rollout.episode import SessionOpener
from rollout.evaluate import evaluate
from rollout.evaluation.runner import token_trial_runner
from rollout.interpret import Interpreter
from tbjax.config import Config
from tbjax.parallel.distributed import broadcast_from_driver, is_driver

SCORE = "pass@1"  # of the campaign's summary.json: mean reward over the split's trials


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One scoring, as every process knows it: the step's score and the best step so far (this one included)."""

    step: int
    score: float
    best_step: int

    @property
    def new_best(self) -> bool:
        return self.best_step == self.step


@dataclasses.dataclass
class Validation:
    tasks: list[Task]
    config: Config
    directory: Path  # <run>/validation (<run>/heldout)
    k: int  # trials per task
    seed: int  # the trials' sampling seeds
    label: str = "validation"

    @classmethod
    def split(cls, tasks: list[Task], config: Config, directory: Path) -> Validation:
        """The validation split's scorings (validation.k, .seed, .every), from the start on."""
        v = config.validation
        return cls(tasks, config, directory, v.k, v.seed)

    @classmethod
    def heldout(cls, tasks: list[Task], config: Config, directory: Path) -> Validation:
        """Held-out tasks scored during training (evaluate.k, .seed, .every) after the start, which the base
        policy's evaluation already scores."""
        e = config.evaluate
        return cls(tasks, config, directory, e.k, e.seed, "held-out")

    def forget_after(self, step: int, validated: Path) -> None:
        """Removes the scorings, and best steps' weights under `validated`, of steps after `step`: a run resumed
        from an older checkpoint does them again, and must not take an abandoned timeline's for its own."""
        for root, prefix in ((self.directory, "step"), (validated, "v")):
            for path in root.glob(f"{prefix}*"):
                number = path.name.removeprefix(prefix)
                if number.isdigit() and int(number) > step:
                    shutil.rmtree(path)

    def campaign(self, step: int) -> Path:
        return self.directory / f"step{step}"

    def scores(self) -> dict[int, float]:
        """The score of every finished scoring, by step (a campaign cut short has no complete summary)."""
        scores = {}
        for summary in self.directory.glob("step*/summary.json"):
            data = json.loads(summary.read_text())
            if data.get("tasks") == len(self.tasks) and data.get("k") == self.k:
                scores[int(summary.parent.name.removeprefix("step"))] = float(data[SCORE])
        return scores

    async def score(self, step: int, engine: Any, interpreter: Interpreter, opener: SessionOpener | None) -> Verdict:
        """Scores the policy `engine` serves as step `step`'s, its episodes opened by `opener` (on the driver;
        the other processes pass None for both and wait for the verdict), or reads the score a resumed run
        already has."""
        values = np.zeros(3, np.float64)
        if is_driver():
            scores = self.scores()
            if step not in scores:
                scores[step] = await self._run(step, engine, interpreter, opener)
            best = max(sorted((s for s in scores if s <= step), reverse=True), key=lambda s: scores[s])
            values[:] = (step, scores[step], best)
        values = broadcast_from_driver(values)
        return Verdict(int(values[0]), float(values[1]), int(values[2]))

    async def _run(self, step: int, engine: Any, interpreter: Interpreter, opener: SessionOpener | None) -> float:
        runner = token_trial_runner(engine, interpreter, model=f"step{step}", config=self.config.episode,
                                    opener=opener, seed=self.seed)
        summary = await evaluate(self.tasks, runner, out=self.campaign(step), k=self.k, resume=True,
                                 concurrency=self.config.groups.max_concurrency,
                                 title=f"{self.label} at step {step}, {len(self.tasks)} tasks x {self.k} trials")
        return float(summary[SCORE])

"""The sections of what the policy is trained and judged on: the task pool (`tasks`), the selection stage
(`select`), the held-out evaluation (`evaluate`) and the validation split scored during GRPO (`validation`)."""

from __future__ import annotations

from typing import Literal

from pydantic import NonNegativeInt, PositiveInt, field_validator, model_validator

from envs.session import PromptStyle
from envs.suite_registry import DEFAULT_SUITE, training_suite
from rollout.task_choice import TaskSource
from tbjax.sections.base import Section


class TasksSection(Section):
    # a trainable suite of envs.suite_registry. builtin: the known domains' tasks (or `file`'s); tau2: τ²-bench's,
    # as the `tau2` section configures them (its train split trains, its test split is evaluation's; `file`,
    # `domains` and `templates` do not apply)
    suite: str = DEFAULT_SUITE
    # Where the tasks come from: `file` if set, else the tasks the known domains generate. Either way the same
    # filters apply, in this order: `domains`, then (train split only) `templates`, then `selected`; the
    # train split trains, the heldout split is evaluation's (evaluate.heldout: templates). A benchmark task
    # (envs.thinkingbox.is_benchmark_task) is refused wherever it comes from.
    # file: a JSONL of your own tasks, one envs.Task per line (envs.write_jsonl writes it), sealed on load
    # against the domains their `domain` field names; None: the domains' own tasks
    file: str | None = None
    selected: str | None = None  # selected.yaml from `python -m rollout.select`; None: every train-split task
    # domains to draw from (None: all): built-in or installed (entry points of the group tbjax.domains) by
    # name, or "module:attr" naming a Domain object of your own (loaded first: a tasks file may then hold
    # its tasks); with `file`, the file's tasks of these domains
    domains: list[str] | None = None
    # train-split templates to draw from (None: all of the domains'); warm start, selection, GRPO and the
    # held-out instances see only these; the heldout split's templates are not filtered
    templates: list[str] | None = None
    seed: int = 0  # shuffling of the task stream
    # uniform: every task as often as any other; by_kind: each task kind (direct, forbidden, approval, ...) as
    # often as any other, in turn, tasks shuffled within their kind, and an all-equal group replaced by a task
    # of its own kind, so a kind with few tasks (the direct writes beside many refusals) still weighs as much
    # in the updates (tbjax.trainer.task_stream)
    draw: Literal["uniform", "by_kind"] = "uniform"
    prompt: PromptStyle = "full"  # how built-in domains instruct the agent (envs.session.PromptStyle)

    @field_validator("suite")
    @classmethod
    def _a_trainable_suite(cls, name: str) -> str:
        training_suite(name)  # an unknown or evaluation-only suite is an error naming the trainable ones
        return name

    def source(self) -> TaskSource:
        """Where the tasks come from and which to keep, as rollout.task_choice reads it."""
        return TaskSource(self.file, self.domains, self.templates, self.selected)


class SelectSection(Section):
    """The selection stage of the default pipeline (tbjax.pipeline.stages): the warm-started policy tries
    `candidates` train-split tasks `trials` times each; rollout.select keeps the bands in `keep`."""

    candidates: int = 0  # 0: no selection stage (train on tasks.selected or every train-split task)
    trials: int = 8
    keep: list[str] = ["hard", "medium", "easy"]
    min_clean_runs: int = 4
    seed: int = 0  # which candidates, and the trials' sampling seeds


class EvaluateSection(Section):
    """The evaluation stage: base and trained policies on the same `tasks` held-out tasks, `k` trials each,
    with the same sampling seeds (a paired comparison)."""

    tasks: int = 0  # 0: no evaluation stage
    # templates: tasks of the heldout split (templates, tools and requests never trained on); instances:
    # train-split tasks kept out of warm start, selection and GRPO (new customers, ids and values)
    heldout: Literal["templates", "instances"] = "templates"
    # with heldout "instances": also this many tasks of the heldout split, evaluated and compared beside them
    templates_tasks: int = 0
    k: int = 8
    seed: int = 0
    concurrency: int = 16
    bootstrap_resamples: int = 1000
    # GRPO steps between scorings of `every_tasks` of the held-out tasks (spread over their templates; k and
    # seed as above) during training, into metrics.jsonl and the learning curves; 0: before and after GRPO only.
    # They choose nothing: the export is chosen on the validation split
    every: NonNegativeInt = 0
    every_tasks: PositiveInt = 16

    @model_validator(mode="after")
    def _scoring_during_training_can_act(self) -> EvaluateSection:
        if self.every_tasks != EvaluateSection.model_fields["every_tasks"].default and not self.every:
            raise ValueError("evaluate.every_tasks sizes the held-out scorings during GRPO, and evaluate.every=0 "
                             "runs none: set evaluate.every, or drop evaluate.every_tasks")
        if self.every and not self.tasks:
            raise ValueError(f"evaluate.every={self.every} scores held-out tasks during GRPO, and evaluate.tasks=0 "
                             "holds none out: set evaluate.tasks (the pipeline's held-out split), or drop "
                             "evaluate.every")
        if self.every and self.every_tasks > self.tasks:
            raise ValueError(f"evaluate.every_tasks={self.every_tasks} exceeds the {self.tasks} held-out tasks "
                             "(evaluate.tasks): give at most that many")
        return self


class ValidationSection(Section):
    """Scoring the policy during GRPO on a validation split, to export the best-validated step rather than
    whichever came last (tbjax.trainer.validation). `tasks` instances of the training templates are carved out
    of the training pool before anything trains on it: like held-out tasks they appear in no demonstration,
    selection or GRPO batch, and they are disjoint from the held-out tasks."""

    tasks: int = 0  # 0: no validation; the last step is exported
    k: PositiveInt = 4  # trials per task, each seeded by (seed, task, trial): every scoring faces the same draws
    every: PositiveInt = 4  # GRPO steps between scorings; the start (step 0) and the last step are scored too
    seed: int = 0  # which tasks are carved out, and the trials' sampling seeds
    # best: the export is the step with the highest validation pass@1 (the latest of equals: the split cannot tell
    # them apart, and the later one has trained on more); last: the last step
    export: Literal["best", "last"] = "best"

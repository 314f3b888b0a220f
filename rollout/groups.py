"""The group scheduler (the rollout half of a GRPO step): B tasks x G episodes, with system errors refilled and
signal-free groups resampled.

Rules, in the order they apply:
- Episodes run concurrently across every group of a pass, at most `max_concurrency` at once.
- A group with any system error (a trajectory without reward or with `system_error`, or the runner raising
  one of `rollout.failures.INFRASTRUCTURE_ERRORS`) is re-run whole, up to `system_error_retries` times; its
  failed runs are counted by kind and never scored. Any other exception of a runner is a bug: it cancels the
  batch's other episodes and propagates. A group that still fails is given up: its task is reported in
  `Batch.replaced_tasks` and a new task from the source takes its place. More than `max_replacements` given-up
  tasks in one batch means the infrastructure is broken, and `SchedulingError` is raised.
- A group's episodes are compared by the objective's `rollout.score_rule.ScoreRule` (the one the trainer's
  advantages come from): the 0/1 verdict, shaped by the format penalty and the overlong rule. A group of equal
  verdicts whose shaped scores differ is informative (the rule's docstring says why).
- DAPO dynamic sampling: a group whose shaped scores are all equal has zero advantage everywhere and is dropped;
  new tasks are drawn for the dropped groups, at most `max_extra_rounds` times. The batch may therefore hold
  fewer than B groups (none: the trainer skips the step and says so). With a `replacement` source, a dropped
  group's task is replaced by one like it (the trainer's by-kind draw: one of the same kind), so the kinds the
  policy has drifted on, whose groups come back all-equal, keep their share of the update instead of ceding it
  to the kinds it still finds mixed.
- Tasks are drawn only between passes and results are kept in draw order, so given the same task order and
  the same episode outcomes the batch is the same however the episodes interleave.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Generic, TypeVar

from rollout.failures import INFRASTRUCTURE_ERRORS, system_error_kind
from rollout.score_rule import VERDICT, ScoreRule
from rollout.trajectory import Trajectory

T = TypeVar("T")
_END = object()
EpisodeRunner = Callable[[T, str, int], Awaitable[Trajectory]]  # (task, group_id, member_index) -> trajectory


class SchedulingError(RuntimeError):
    """Too many groups failed with system errors: training on what is left would be biased."""

    kind = "scheduling"


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    """How a step's batch is filled: B informative groups of G episodes each (small by default; the 27B
    reference configs set the seed run's 18 x 8 with 144 episodes in flight)."""

    groups: int = 4  # B: informative groups wanted per step
    group_size: int = 8  # G: episodes per task
    max_concurrency: int = 32  # episodes in flight at once
    system_error_retries: int = 2  # re-runs of a group hit by a system error before its task is replaced
    max_extra_rounds: int = 4  # dynamic-sampling draws beyond the first B tasks
    max_replacements: int | None = None  # given-up tasks tolerated per batch; None: `groups`
    refill_delay_s: float = 0.0  # wait before a re-run (doubling each time): a restarting server needs it

    def __post_init__(self) -> None:
        if self.groups < 1 or self.group_size < 2 or self.max_concurrency < 1:
            raise ValueError(f"need groups >= 1, group_size >= 2 (GRPO compares within a group) and "
                             f"max_concurrency >= 1, got {self}")


@dataclasses.dataclass
class Group(Generic[T]):
    task: T
    group_id: str
    trajectories: list[Trajectory]
    score_rule: ScoreRule  # the scheduler's: what the group's episodes are compared by

    @property
    def rewards(self) -> list[float]:
        """The verdicts (what pass rates count)."""
        return [t.reward for t in self.trajectories if t.reward is not None]

    @property
    def scores(self) -> list[float]:
        """The shaped scores the episodes' advantages come from."""
        return [self.score_rule.score(t) for t in self.trajectories]

    @property
    def informative(self) -> bool:
        """Whether the shaped scores differ: a group where they do not has no gradient and is dropped."""
        return self.score_rule.informative(self.trajectories)


@dataclasses.dataclass
class GroupCounts:
    """What it took to fill the batch (all counts are of groups unless named otherwise)."""

    informative: int = 0  # groups in the batch
    dropped_all_equal: int = 0  # dropped by dynamic sampling
    resampled: int = 0  # tasks drawn to replace dropped groups
    refilled: int = 0  # re-runs of groups hit by a system error
    replaced: int = 0  # tasks given up after exhausted re-runs (replaced from the source)
    system_errors: Counter[str] = dataclasses.field(default_factory=Counter)  # failed episodes by kind
    tasks_drawn: int = 0
    episodes: int = 0  # episodes run, failed ones included
    scored_episodes: int = 0  # episodes of groups without system errors, kept or dropped
    reward_sum: float = 0.0  # over scored episodes: the step's pass rate is reward_sum / scored_episodes
    extra_rounds: int = 0
    source_exhausted: bool = False


@dataclasses.dataclass
class Batch(Generic[T]):
    groups: list[Group[T]]  # informative groups in draw order, at most `groups`
    counts: GroupCounts
    scored: list[Group[T]]  # every group that ran without system errors, kept or dropped, in draw order
    replaced_tasks: list[T]


class GroupScheduler(Generic[T]):
    """Fills one batch per `next_batch()` call from a task iterator the caller owns (and checkpoints), keeping
    the groups `score_rule` finds informative (the objective's rule; default: the verdict alone)."""

    def __init__(self, tasks: Iterator[T], run_episode: EpisodeRunner[T], config: GroupConfig,
                 first_draw: int = 0, replacement: Callable[[T], T] | None = None,
                 score_rule: ScoreRule = VERDICT) -> None:
        self._tasks = tasks
        self._replacement = replacement  # the task that replaces a dropped group's (None: the stream's next)
        self._run_episode = run_episode
        self.config = config
        self.score_rule = score_rule
        self._draws = first_draw  # group ids stay unique across batches (and across a resume: see `draws`)

    @property
    def draws(self) -> int:
        """Tasks drawn so far: checkpoint it and pass it back as `first_draw` so a resumed run names (and
        seeds) its groups exactly as the uninterrupted run would."""
        return self._draws

    async def next_batch(self) -> Batch[T]:
        config = self.config
        counts = GroupCounts()
        limit = config.groups if config.max_replacements is None else config.max_replacements
        semaphore = asyncio.Semaphore(config.max_concurrency)
        kept: list[Group[T]] = []
        scored: list[Group[T]] = []
        replaced: list[T] = []
        pending = self._draw(config.groups, counts)
        while pending:
            results = await _gather([self._run_group(i, task, semaphore, counts) for i, task in pending])
            failed = 0
            equal: list[T] = []
            for (_, task), group in zip(pending, results, strict=True):
                if group is None:
                    failed += 1
                    replaced.append(task)
                else:
                    scored.append(group)
                    if group.informative:
                        kept.append(group)
                    else:
                        equal.append(task)
            counts.replaced += failed
            counts.dropped_all_equal += len(equal)
            if counts.replaced > limit:
                raise SchedulingError(
                    f"{counts.replaced} tasks failed {config.system_error_retries + 1} times each with system "
                    f"errors {dict(counts.system_errors)} (limit {limit}): the engine, sandboxes or user "
                    f"simulator are failing; fix them rather than train on what is left")
            if equal and counts.extra_rounds < config.max_extra_rounds:
                counts.extra_rounds += 1
            else:
                equal = []
            replacements, resamples = self._draw(failed, counts), self._resample(equal, counts)
            counts.resampled += len(resamples)
            pending = replacements + resamples
        counts.informative = len(kept)
        return Batch(kept, counts, scored, replaced)

    def _draw(self, n: int, counts: GroupCounts) -> list[tuple[int, T]]:
        """The stream's next `n` tasks (fewer where it ends), numbered."""
        tasks = []
        for _ in range(n):
            task = next(self._tasks, _END)
            if task is _END:
                counts.source_exhausted = True
                break
            tasks.append(task)
        return self._numbered(tasks, counts)

    def _resample(self, dropped: list[T], counts: GroupCounts) -> list[tuple[int, T]]:
        """The tasks that take the dropped groups' places."""
        if self._replacement is None:
            return self._draw(len(dropped), counts)
        return self._numbered([self._replacement(task) for task in dropped], counts)

    def _numbered(self, tasks: list[T], counts: GroupCounts) -> list[tuple[int, T]]:
        """Each task with its draw number, which names and seeds its group."""
        drawn = [(self._draws + n, task) for n, task in enumerate(tasks)]
        self._draws += len(drawn)
        counts.tasks_drawn += len(drawn)
        return drawn

    async def _run_group(self, draw: int, task: T, semaphore: asyncio.Semaphore,
                         counts: GroupCounts) -> Group[T] | None:
        """The group's trajectories, or None when every run hit a system error."""
        for attempt in range(self.config.system_error_retries + 1):
            if attempt:
                await asyncio.sleep(self.config.refill_delay_s * 2 ** (attempt - 1))
            group_id = f"g{draw}" if attempt == 0 else f"g{draw}.r{attempt}"
            members = range(self.config.group_size)
            results = await _gather([self._episode(task, group_id, m, semaphore) for m in members])
            counts.episodes += len(results)
            errors = [r for r in results if isinstance(r, str)]
            if not errors:
                group = Group(task, group_id, [r for r in results if isinstance(r, Trajectory)], self.score_rule)
                counts.scored_episodes += len(group.trajectories)
                counts.reward_sum += sum(group.rewards)
                return group
            counts.system_errors.update(errors)
            if attempt < self.config.system_error_retries:
                counts.refilled += 1
        return None

    async def _episode(self, task: T, group_id: str, member: int,
                       semaphore: asyncio.Semaphore) -> Trajectory | str:
        """A trajectory with a reward, or the kind of system error that voided it."""
        async with semaphore:
            try:
                trajectory = await self._run_episode(task, group_id, member)
            except INFRASTRUCTURE_ERRORS as error:
                return system_error_kind(error, type(error).__name__)
        if trajectory.group_id != group_id:
            raise ValueError(f"the episode runner returned group_id {trajectory.group_id!r} for group "
                             f"{group_id!r}; advantages are computed per group_id, so it must pass it through")
        if trajectory.system_error is not None or trajectory.reward is None:
            return trajectory.system_error or "missing_reward"
        return trajectory


async def _gather(coroutines: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Like asyncio.gather, but a failure cancels the siblings and is raised as itself (not a group): a bug
    in one episode stops the batch instead of leaving episodes running unattended."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coroutines]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from failures
    return [t.result() for t in tasks]

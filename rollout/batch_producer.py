"""Batches produced ahead of the update that consumes them, within a staleness bound (asynchronous GRPO).

Batch i is what update i + 1 trains on; that update starts from the weights of step i, published under the
version "i" (the weights after i steps; a step that skipped its update published nothing, and the version
served before still names the same weights). An episode is as stale as the number of versions published
after the one its oldest turn was sampled under, up to the one the consuming update starts from (a refresh
may land between turns, and later turns are only fresher). With `max_staleness` k:

- Batches are produced one after another, in order, so tasks are drawn (and groups named and seeded) in
  the same order as the synchronous loop draws them, whatever the timing.
- Batch i starts once step i - k is served: between then and its consumption at most k updates happen, so
  its episodes are at most k versions stale. k = 0 is the synchronous loop's rule (batch i waits for step
  i); k = 1 lets batch i + 1 run while update i + 1 runs.
- At consumption every group is measured: one holding an episode staler than k (none, when the engine
  recorded every turn's version as served) is dropped and counted, never trained on.

The producer also keeps what the step's accounting needs: how long the consumer waited for its batch (the
trainer idle) and how long no batch was being produced (the engines idle, as far as training goes).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from rollout.groups import Batch, Group
from rollout.trajectory import Trajectory

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ConsumedBatch(Generic[T]):
    """A batch as its update takes it: the groups fresh enough to train on, and what was measured."""

    batch: Batch[T]
    published: tuple[int, ...]  # the versions published so far, ascending: the last is what the update starts from
    staleness: dict[int, int]  # versions stale -> consumed episodes (scored groups, kept or dropped)
    too_old: int  # groups dropped for holding an episode staler than the bound
    draws: int  # tasks drawn once this batch was complete: where a resumed run's next batch draws from
    waited_s: float  # how long the consumer waited for it

    def is_stale(self, trajectory: Trajectory) -> bool:
        """Whether a turn of `trajectory` was sampled under older weights than the update starts from."""
        return episode_staleness(trajectory.weight_versions, self.published) > 0


def episode_staleness(versions: list[str], published: Sequence[int]) -> int:
    """How many of the `published` versions (ascending; the last is what the consuming update starts from) came
    after the oldest of an episode's turns was sampled (0 for an episode without turns). Versions are the step
    numbers the trainer publishes under."""
    if not versions:
        return 0
    try:
        oldest = min(int(v) for v in versions)
    except ValueError as error:
        raise ValueError(f"weight versions {versions} are not the integer steps the trainer publishes; an engine "
                         "that names its weights otherwise cannot be used with rollout.max_staleness > 0") from error
    return len(published) - bisect.bisect_right(published, oldest)


class BatchProducer(Generic[T]):
    """Produces batches `first` .. `last` with `produce(index)` under the staleness rule of the module
    docstring, each as soon as the rule allows (also while the consumer updates). The consumer calls
    `take(index)` for each in order and `served(version)` after each refresh; `close()` cancels what is still
    running. `draws()` tells how many tasks the producer's scheduler has drawn so far."""

    def __init__(self, produce: Callable[[int], Awaitable[Batch[T]]], draws: Callable[[], int], *,
                 max_staleness: int, first: int, last: int, served: int) -> None:
        if max_staleness < 0:
            raise ValueError(f"max_staleness={max_staleness}: give 0 (synchronous) or more")
        self._produce = produce
        self._draws = draws
        self.max_staleness = max_staleness
        self._next = first  # the next batch to start
        self._to_take = first  # the next batch the consumer takes
        self._last = last
        self._served = served
        self._published = [served]  # the versions published since the start (ascending), the served one last
        self._tasks: dict[int, asyncio.Task[Batch[T]]] = {}  # started, not yet taken
        self._running: int | None = None  # the batch being produced
        self._draws_after: dict[int, int] = {}  # index -> tasks drawn once it was complete
        self._busy_s = 0.0  # seconds during which a batch was being produced
        self._busy_since = 0.0
        self.start_versions: dict[int, int] = {}  # index -> the version served when it started

    def served(self, step: int, *, new_weights: bool = True) -> None:
        """The engines now serve step `step`'s weights (`new_weights`: published as version `step`; False: the
        step skipped its update and the version served before names them): a batch that waited may start."""
        self._served = step
        if new_weights:
            self._published.append(step)
        self._start_next()

    async def take(self, index: int) -> ConsumedBatch[T]:
        """Batch `index`, once produced, its groups measured against the version served now, which the update
        starts from (groups staler than the bound dropped); the next batch starts as soon as the rule allows."""
        if index != self._to_take:
            raise ValueError(f"batch {index} taken out of order: the next to take is {self._to_take}")
        self._start_next()
        if index not in self._tasks:
            raise RuntimeError(f"batch {index} cannot start: step {self._served}'s weights are served and it needs "
                               f"step {index - self.max_staleness}'s; refresh the engines before taking it")
        start = time.perf_counter()
        batch = await self._tasks[index]  # a failed production (a bug, or infrastructure given up on) raises
        waited = time.perf_counter() - start
        del self._tasks[index]
        self._to_take += 1
        self._start_next()
        return _measured(batch, self._published, self.max_staleness, self._draws_after.pop(index), waited)

    def busy_seconds(self) -> float:
        """Seconds during which a batch was being produced, so far."""
        running = time.perf_counter() - self._busy_since if self._running is not None else 0.0
        return self._busy_s + running

    async def close(self) -> None:
        """Cancels what is still being produced."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def _start_next(self) -> None:
        """Starts the next batch if none is being produced, one is left and its version is served."""
        self._settle()
        if self._running is not None or self._next > self._last or self._served < self._next - self.max_staleness:
            return
        index = self._next
        self.start_versions[index] = self._served
        self._running, self._busy_since = index, time.perf_counter()
        self._tasks[index] = asyncio.ensure_future(self._produce(index))
        self._tasks[index].add_done_callback(lambda _: self._start_next())
        self._next += 1

    def _settle(self) -> None:
        """Records the production that finished, once: the draws it left (before the next batch draws more)."""
        if self._running is None or not self._tasks[self._running].done():
            return
        index, self._running = self._running, None
        self._busy_s += time.perf_counter() - self._busy_since
        task = self._tasks[index]
        if task.cancelled() or task.exception() is not None:
            self._next = self._last + 1  # nothing more is produced: `take` raises the failure
        else:
            self._draws_after[index] = self._draws()


def _measured(batch: Batch[T], published: Sequence[int], max_staleness: int, draws: int,
              waited: float) -> ConsumedBatch[T]:
    """`batch` without the groups holding an episode staler than `max_staleness`, and the staleness of every
    scored episode."""
    staleness: collections.Counter[int] = collections.Counter()
    stale: list[Group[T]] = []
    for group in batch.scored:
        ages = [episode_staleness(t.weight_versions, published) for t in group.trajectories]
        staleness.update(ages)
        if group.informative and max(ages, default=0) > max_staleness:
            stale.append(group)
    kept = [g for g in batch.groups if not any(g is old for old in stale)]
    counts = dataclasses.replace(batch.counts, informative=len(kept))
    return ConsumedBatch(Batch(kept, counts, batch.scored, batch.replaced_tasks), tuple(published),
                         dict(sorted(staleness.items())), len(stale), draws, waited)

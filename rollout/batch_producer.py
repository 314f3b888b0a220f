"""Batches produced ahead of the update that consumes them, within a staleness bound (asynchronous GRPO).

Batch i is what update i + 1 trains on; that update starts from the weights of step i, published under the
version "i" (the weights after i steps; a step that skipped its update published nothing, and the version
served before still names the same weights). An episode is as stale as the number of versions published
after the one its oldest turn was sampled under, up to the one the consuming update starts from (a publish
may reach the engines between turns, and later turns are only fresher). With `max_staleness` k:

- Batches are produced one after another, in order, so tasks are drawn (and groups named and seeded) in
  the same order as the synchronous loop draws them, whatever the timing.
- Batch i starts once step i - k is served: between then and its consumption at most k updates happen, so
  its episodes are at most k versions stale. k = 0 is the synchronous loop's rule (batch i waits for step
  i); k = 1 lets batch i + 1 run while update i + 1 runs.
- At consumption every group is measured: one holding an episode staler than k (none, when the engine
  recorded every turn's version as served) is dropped and counted, never trained on.

Which weights sample a batch depends on the mode:

- eager: every publish reaches the engines at once, between the running episodes' turns
  (the freshest weights; which turn saw which version depends on timing). A resumed run samples again, under
  the restored weights, the batches in flight when its checkpoint was written (`in_flight`, kept in the
  checkpoint; the consumed batch says it was `replayed`).
- exact (`pinned`): batch i is sampled wholly under the weights of step `pinned(i)`; the loop hands each
  update's publish over as a `Publication`, served only when a batch needs it, between batches. With
  `pinned(i)` = i - k, or the latest checkpoint (or validation) step at or before i where that is newer,
  nothing is in flight at a checkpoint and no result depends on timing: a resumed run repeats the
  uninterrupted one bit for bit (with a deterministic engine), at the cost of draining at those steps.

The producer also keeps what the step's accounting needs: how long the consumer waited for its batch (the
trainer idle) and how long no batch was being produced (the engines idle, as far as training goes).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import dataclasses
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Generic, TypeVar

from rollout.groups import Batch
from rollout.trajectory import Trajectory

T = TypeVar("T")
# makes the engines serve a published version and verifies it; what the verification measured
Publication = Callable[[], Awaitable[dict[str, float]]]


@dataclasses.dataclass(frozen=True)
class ConsumedBatch(Generic[T]):
    """A batch as its update takes it: the groups fresh enough to train on, and what was measured."""

    batch: Batch[T]
    published: tuple[int, ...]  # the versions published so far, ascending: the last is what the update starts from
    staleness: dict[int, int]  # versions stale -> consumed episodes (scored groups, kept or dropped)
    too_old: int  # groups dropped for holding an episode staler than the bound
    draws: int  # tasks drawn once this batch was complete: where a resumed run's next batch draws from
    waited_s: float  # how long the consumer waited for it
    replayed: bool = False  # in flight when the checkpoint this run resumed from was written: sampled again

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
    `take(index)` for each in order and `updated(step)` after each update; `close()` cancels what is still
    running. `draws()` tells how many tasks the producer's scheduler has drawn so far. With `pinned` (exact
    mode) batch i is sampled under step `pinned(i)`'s weights, which must be at most i and never decrease.
    `replaying`: the batches a resumed run samples again (in flight at its checkpoint)."""

    def __init__(self, produce: Callable[[int], Awaitable[Batch[T]]], draws: Callable[[], int], *,
                 max_staleness: int, first: int, last: int, served: int,
                 pinned: Callable[[int], int] | None = None, replaying: Collection[int] = ()) -> None:
        if max_staleness < 0:
            raise ValueError(f"max_staleness={max_staleness}: give 0 (synchronous) or more")
        self._produce = produce
        self._draws = draws
        self.max_staleness = max_staleness
        self._pinned = pinned
        self._replaying = frozenset(replaying)
        self._next = first  # the next batch to start
        self._to_take = first  # the next batch the consumer takes
        self._last = last
        self._updated = served  # the newest step whose update is done
        self._served = served  # the step whose weights the engines serve
        self._published = [served]  # the versions published since the start (ascending), the served one last
        self._publications: list[tuple[int, Publication]] = []  # exact mode: published, not yet served, ascending
        self._serving = asyncio.Lock()  # one publication served at a time, in order
        self._verified: dict[str, float] = {}  # what the publications served since the last `verified()` measured
        self._tasks: dict[int, asyncio.Task[Batch[T]]] = {}  # started, not yet taken
        self._running: int | None = None  # the batch being produced
        self._first_draws: dict[int, int] = {}  # index -> tasks drawn before it started (started, not taken)
        self._draws_after: dict[int, int] = {}  # index -> tasks drawn once it was complete
        self._busy_s = 0.0  # seconds during which a batch was being produced
        self._busy_since = 0.0
        self.start_versions: dict[int, int] = {}  # index -> the version served when it started

    def updated(self, step: int, *, new_weights: bool = True, publication: Publication | None = None) -> None:
        """Step `step`'s update is done (`new_weights`: published as version `step`; False: the step skipped
        its update and the version before names its weights). Eager: the engines already serve them. Exact:
        `publication` makes them do so, when a batch needs them. A batch that waited may start."""
        if (publication is not None) != (self._pinned is not None and new_weights):
            raise ValueError("a Publication comes with each new version in exact mode (pinned), and only then")
        self._updated = step
        if new_weights:
            self._published.append(step)
        if publication is not None:
            self._publications.append((step, publication))
        elif self._pinned is None:
            self._served = step
        self._start_next()

    async def serve(self, step: int) -> None:
        """Exact mode: the engines serve step `step`'s weights before this returns (the loop's validation scores
        them); refused while a batch pinned to older weights is being produced."""
        if self._running is not None and self._pin(self._running) < step:
            raise RuntimeError(f"step {step}'s weights cannot be served while batch {self._running} is sampled under "
                               f"step {self._pin(self._running)}'s")
        await self._serve_published(step)

    def verified(self) -> dict[str, float]:
        """What the publications served since the last call measured (the newest one's)."""
        measured, self._verified = self._verified, {}
        return measured

    def in_flight(self) -> dict[int, int]:
        """The batches started and not yet taken, each with the tasks drawn before it started (what a
        checkpoint keeps)."""
        return {index: self._first_draws[index] for index in sorted(self._tasks)}

    async def take(self, index: int) -> ConsumedBatch[T]:
        """Batch `index`, once produced, its groups measured against the version served now, which the update
        starts from (groups staler than the bound dropped); the next batch starts as soon as the rule allows."""
        if index != self._to_take:
            raise ValueError(f"batch {index} taken out of order: the next to take is {self._to_take}")
        self._start_next()
        if index not in self._tasks:
            raise RuntimeError(f"batch {index} cannot start: step {self._updated}'s update is done and it needs "
                               f"step {self._needs(index)}'s weights; update the engines before taking it")
        start = time.perf_counter()
        batch = await self._tasks[index]  # a failed production (a bug, or infrastructure given up on) raises
        waited = time.perf_counter() - start
        del self._tasks[index], self._first_draws[index]
        self._to_take += 1
        self._start_next()
        consumed = _measured(batch, self._published, self.max_staleness, self._draws_after.pop(index), waited)
        return dataclasses.replace(consumed, replayed=index in self._replaying)

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

    def _pin(self, index: int) -> int:
        assert self._pinned is not None
        pinned = self._pinned(index)
        if pinned > index:
            raise ValueError(f"batch {index} pinned to step {pinned}'s weights, which it trains to produce")
        return pinned

    def _needs(self, index: int) -> int:
        """The step whose update must be done before batch `index` starts."""
        return self._pin(index) if self._pinned is not None else index - self.max_staleness

    def _start_next(self) -> None:
        """Starts the next batch if none is being produced, one is left and the weights it needs exist."""
        self._settle()
        if self._running is not None or self._next > self._last or self._updated < self._needs(self._next):
            return
        index = self._next
        self._running, self._busy_since = index, time.perf_counter()
        self._first_draws[index] = self._draws()
        self._tasks[index] = asyncio.ensure_future(self._production(index))
        self._tasks[index].add_done_callback(lambda _: self._start_next())
        self._next += 1

    async def _production(self, index: int) -> Batch[T]:
        if self._pinned is not None:
            await self._serve_published(self._pin(index))
        self.start_versions[index] = self._served
        return await self._produce(index)

    async def _serve_published(self, step: int) -> None:
        """Serves and verifies the versions published up to step `step`'s, in order (a delta applies to the one
        before)."""
        async with self._serving:
            while self._publications and self._publications[0][0] <= step:
                _, publication = self._publications.pop(0)
                self._verified = await publication()
            self._served = max(self._served, step)

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
    scored episode. The groups measured are those the scheduler kept: its score rule decided once which are
    informative, and deciding again here could disagree with it (and with the packer, which trains on them)."""
    def age(trajectory: Trajectory) -> int:
        return episode_staleness(trajectory.weight_versions, published)

    staleness = collections.Counter(age(t) for group in batch.scored for t in group.trajectories)
    kept = [g for g in batch.groups if all(age(t) <= max_staleness for t in g.trajectories)]
    counts = dataclasses.replace(batch.counts, informative=len(kept))
    return ConsumedBatch(Batch(kept, counts, batch.scored, batch.replaced_tasks), tuple(published),
                         dict(sorted(staleness.items())), len(batch.groups) - len(kept), draws, waited)

"""Batches produced ahead of the update (rollout.batch_producer) with the real group scheduler, episodes whose
turns take random times and record the weight version served at each turn, and a consumer whose updates take
random times and then publish a new served version: no consumed episode is staler than the bound, each batch's
histogram agrees with its episodes' versions, the draws are the synchronous loop's whatever the timing, and an
engine that serves an old version has its groups dropped and counted. In exact mode every batch is sampled
under the one version it is pinned to, whatever the timing, the publications served in order between batches."""

import asyncio
import random
from collections.abc import Callable

import pytest

from rollout.batch_producer import BatchProducer, ConsumedBatch, episode_staleness
from rollout.groups import Batch, GroupConfig, GroupCounts, GroupScheduler
from rollout.trajectory import Trajectory

STEPS = 6
TURNS = 3


class Served:
    """The weight version the engines serve (what the consumer publishes after each update); `lag` versions
    behind it for an engine that missed publishes."""

    def __init__(self, lag: int = 0) -> None:
        self.version = 0
        self.lag = lag

    def current(self) -> str:
        return str(max(self.version - self.lag, 0))


def runner(served: Served, jitter: random.Random, batch_index: list[int], drawn: list[tuple[int, str, str, int]]):
    """Episodes of TURNS turns, each after a random delay, each recording the version served then; mixed
    outcomes that depend on the task, group and member alone."""
    async def episode(task: str, group_id: str, member: int) -> Trajectory:
        drawn.append((batch_index[0], task, group_id, member))
        versions = []
        for _ in range(TURNS):
            await asyncio.sleep(jitter.uniform(0, 0.004))
            versions.append(served.current())
        reward = float((int(task[4:]) * member + member) % 2) if task.startswith("task") else 1.0
        return Trajectory(task_id=task, group_id=group_id, token_ids=[1], loss_mask=[1], logprobs=[-0.5],
                          weight_versions=versions, reward=reward, termination="agent_done")
    return episode


def publication(served: Served, version: int, served_versions: list[int] | None):
    """What makes the engine serve `version`, after a random wait (a server loading it)."""
    async def serve_version() -> dict[str, float]:
        await asyncio.sleep(random.uniform(0, 0.004))
        served.version = version
        if served_versions is not None:
            served_versions.append(version)
        return {"served_versions": float(version)}
    return serve_version


def tasks():
    n = 0
    while True:
        yield f"task{n}" if n % 3 else f"pass{n}"  # every third all-pass: dropped and resampled
        n += 1


def run(max_staleness: int, seed: int, lag: int = 0, skipped: frozenset[int] = frozenset(),
        pinned: Callable[[int], int] | None = None, served_versions: list[int] | None = None,
        ) -> tuple[list[ConsumedBatch[str]], list, BatchProducer[str]]:
    """STEPS batches consumed in order by updates of random length (the steps in `skipped` update nothing and
    publish nothing); the consumed batches, what was drawn (batch, task, group, member) and the producer. With
    `pinned` (exact mode) each update hands over a publication that serves its version (appended to
    `served_versions`)."""
    jitter = random.Random(seed)
    served = Served(lag)
    batch_index = [0]
    drawn: list[tuple[int, str, str, int]] = []
    scheduler = GroupScheduler(tasks(), runner(served, jitter, batch_index, drawn),
                               GroupConfig(groups=2, group_size=4, max_extra_rounds=2))

    async def produce(index: int) -> Batch[str]:
        batch_index[0] = index
        return await scheduler.next_batch()

    async def consume() -> tuple[list[ConsumedBatch[str]], BatchProducer[str]]:
        producer = BatchProducer(produce, lambda: scheduler.draws, max_staleness=max_staleness, first=0,
                                 last=STEPS - 1, served=0, pinned=pinned)
        consumed = []
        for step in range(STEPS):
            consumed.append(await producer.take(step))
            await asyncio.sleep(jitter.uniform(0, 0.02))  # the update
            new_weights = step not in skipped
            if pinned is None:
                served.version = step + 1 if new_weights else served.version
                producer.updated(step + 1, new_weights=new_weights)
            else:
                producer.updated(step + 1, new_weights=new_weights,
                                 publication=publication(served, step + 1, served_versions) if new_weights else None)
        await producer.close()
        return consumed, producer
    consumed, producer = asyncio.run(consume())
    return consumed, drawn, producer


@pytest.mark.parametrize("max_staleness", [0, 1, 2])
@pytest.mark.parametrize(("seed", "skipped"), [(0, frozenset()), (1, frozenset()), (2, frozenset({1, 2}))])
def test_no_consumed_episode_is_staler_than_the_bound_and_the_histogram_agrees(max_staleness, seed, skipped) -> None:
    """Staleness counts versions of weights: a step that skipped its update published none."""
    consumed, _, _ = run(max_staleness, seed, skipped=skipped)
    for step, taken in enumerate(consumed):
        episodes = [t for g in taken.batch.scored for t in g.trajectories]
        assert sum(taken.staleness.values()) == len(episodes) == taken.batch.counts.scored_episodes
        published = [s for s in range(step + 1) if s == 0 or s - 1 not in skipped]
        recomputed: dict[int, int] = {}
        for t in episodes:
            age = sum(1 for version in published if version > min(int(v) for v in t.weight_versions))
            recomputed[age] = recomputed.get(age, 0) + 1
        assert taken.staleness == dict(sorted(recomputed.items()))
        assert max(taken.staleness) <= max_staleness
        assert taken.too_old == 0


def test_batches_run_beside_the_update_only_when_staleness_allows() -> None:
    _, _, synchronous = run(0, seed=0)
    assert synchronous.start_versions == {i: i for i in range(STEPS)}  # batch i waits for version i
    _, _, ahead = run(1, seed=0)
    # batch i started under version i - 1: during update i (the updates here are slower than the batches)
    assert ahead.start_versions == {0: 0, **{i: i - 1 for i in range(1, STEPS)}}


def test_the_draws_are_the_synchronous_loops_whatever_the_timing() -> None:
    """Tasks, group ids and the batch each group is seeded by: the same with batches produced ahead, under
    other random timings, as in the synchronous loop; and so are the draws a checkpoint records."""
    _, reference, _ = run(0, seed=0)
    consumed_reference, _, _ = run(0, seed=0)
    for max_staleness, seed in [(1, 1), (2, 2), (1, 3)]:
        consumed, drawn, _ = run(max_staleness, seed)
        assert sorted(drawn) == sorted(reference)
        assert [c.draws for c in consumed] == [c.draws for c in consumed_reference]
        assert [[g.group_id for g in c.batch.groups] for c in consumed] == \
            [[g.group_id for g in c.batch.groups] for c in consumed_reference]


def test_groups_an_engine_sampled_too_long_ago_are_dropped_and_counted() -> None:
    """An engine two publishes behind: with a bound of 1, every informative group whose oldest turn is 2 or
    more versions old is dropped from the batch, counted, and still in the histogram."""
    consumed, _, _ = run(1, seed=0, lag=2)
    late = [c for step, c in enumerate(consumed) if step >= 2]
    assert all(c.too_old > 0 for c in late)
    for step, taken in enumerate(consumed):
        for group in taken.batch.groups:
            assert max(episode_staleness(t.weight_versions, range(step + 1)) for t in group.trajectories) <= 1
        informative = [g for g in taken.batch.scored if g.informative]
        assert len(taken.batch.groups) + taken.too_old == len(informative)
        assert taken.batch.counts.informative == len(taken.batch.groups)


def test_a_failed_production_is_raised_by_take_and_nothing_more_starts() -> None:
    started = []

    async def produce(index: int) -> Batch[str]:
        started.append(index)
        await asyncio.sleep(0)
        raise ValueError("a bug in an episode")

    async def consume() -> None:
        producer = BatchProducer(produce, lambda: 0, max_staleness=2, first=0, last=5, served=0)
        with pytest.raises(ValueError, match="a bug in an episode"):
            await producer.take(0)
        producer.updated(1)
        await producer.close()
    asyncio.run(consume())
    assert started == [0]


def test_versions_that_are_not_steps_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not the integer steps the trainer publishes"):
        episode_staleness(["base", "1"], [0, 1, 2, 3])


@pytest.mark.parametrize(("max_staleness", "seed", "skipped"), [(1, 0, frozenset()), (2, 1, frozenset({2}))])
def test_exact_mode_samples_each_batch_under_the_version_it_is_pinned_to(max_staleness, seed, skipped) -> None:
    """Pinned to k steps before, a drain at step 3: every turn of batch i reports pin(i) (a skipped step's
    version is the one before), the publications are served once each and in order, and the draws stay the
    synchronous loop's."""
    def pin(index: int) -> int:
        return 3 if index >= 3 and index - max_staleness < 3 else max(0, index - max_staleness)
    served_versions: list[int] = []
    consumed, drawn, producer = run(max_staleness, seed, skipped=skipped, pinned=pin,
                                    served_versions=served_versions)
    published = [0] + [s + 1 for s in range(STEPS) if s not in skipped]
    for index, taken in enumerate(consumed):
        weights = max(v for v in published if v <= pin(index))
        assert {v for g in taken.batch.scored for t in g.trajectories for v in t.weight_versions} == {str(weights)}
        assert producer.start_versions[index] == pin(index)
    assert served_versions == sorted(set(served_versions)) and set(served_versions) <= set(published[1:])
    _, reference, _ = run(0, seed=0)
    assert sorted(drawn) == sorted(reference)


def test_exact_mode_serves_a_drain_at_once_and_says_what_it_verified() -> None:
    """`serve` serves the version a drain needs before the next batch starts (the loop's validation scores it),
    refuses while a batch pinned to older weights runs, and `verified` gives the publication's measurements once."""
    served = Served()
    started = []

    async def produce(index: int) -> Batch[str]:
        started.append((index, served.version))
        await asyncio.sleep(0.01)
        return Batch([], GroupCounts(), [], [])

    async def consume() -> None:
        producer = BatchProducer(produce, lambda: 0, max_staleness=1, first=0, last=3, served=0,
                                 pinned=lambda i: max(0, i - 1))
        await producer.take(0)
        assert producer.in_flight() == {1: 0}  # batch 1 runs under version 0 beside update 1
        producer.updated(1, publication=publication(served, 1, None))
        with pytest.raises(RuntimeError, match="while batch 1 is sampled under step 0's"):
            await producer.serve(1)
        await producer.take(1)
        await producer.serve(1)  # batch 2, pinned to 1, may have served it first: then nothing is left to serve
        assert served.version == 1 and producer.verified() == {"served_versions": 1.0} and producer.verified() == {}
        with pytest.raises(ValueError, match="a Publication comes with each new version in exact mode"):
            producer.updated(2)
        await producer.take(2)
        await producer.close()
    asyncio.run(consume())
    assert started[:3] == [(0, 0), (1, 0), (2, 1)]

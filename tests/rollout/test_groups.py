"""The group scheduler with scripted episode runners: system errors are refilled and never scored, failing
tasks are replaced, all-equal groups are resampled within the cap, and the batch is deterministic."""

import asyncio
import random
from collections import Counter

import pytest

from rollout.engines.protocol import EngineError
from rollout.groups import GroupConfig, GroupScheduler, SchedulingError
from rollout.trajectory import Trajectory


def trajectory(task: str, group_id: str, reward: float | None, system_error: str | None = None) -> Trajectory:
    return Trajectory(task_id=task, group_id=group_id, token_ids=[1], loss_mask=[1], logprobs=[-0.5],
                      weight_versions=["0"], reward=reward, system_error=system_error,
                      termination="system_error" if system_error else "agent_done")


class Script:
    """Outcomes by task name: 'mixed*' alternate 1/0 over members, 'pass*' all 1, 'fail*' all 0, 'flaky*'
    raises EngineError for member 0 on a group's first run, 'broken*' always reports an endpoint timeout.
    `jitter` makes episodes finish in a random order."""

    def __init__(self, jitter: random.Random | None = None) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.active = self.max_active = 0
        self.jitter = jitter

    async def __call__(self, task: str, group_id: str, member: int) -> Trajectory:
        self.calls.append((task, group_id, member))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.jitter.uniform(0, 0.003) if self.jitter else 0.001)
        finally:
            self.active -= 1
        if task.startswith("flaky") and "." not in group_id and member == 0:
            raise EngineError("server gone")
        if task.startswith("broken"):
            return trajectory(task, group_id, None, "endpoint_timeout")
        reward = {"mixed": member % 2, "pass": 1.0, "fail": 0.0, "flaky": member % 2}[task.rstrip("0123456789")]
        return trajectory(task, group_id, float(reward))


def batch(tasks, script, **config):
    config = GroupConfig(**{"groups": 2, "group_size": 4, **config})
    return asyncio.run(GroupScheduler(iter(tasks), script, config).next_batch())


def test_informative_groups_fill_the_batch_in_draw_order():
    script = Script()
    result = batch(["mixed1", "mixed2", "mixed3"], script)
    assert [(g.task, g.group_id, g.rewards) for g in result.groups] == [
        ("mixed1", "g0", [0.0, 1.0, 0.0, 1.0]), ("mixed2", "g1", [0.0, 1.0, 0.0, 1.0])]
    c = result.counts
    assert (c.informative, c.tasks_drawn, c.episodes, c.dropped_all_equal, c.refilled) == (2, 2, 8, 0, 0)


def test_system_error_group_is_rerun_whole_and_never_scored():
    script = Script()
    result = batch(["mixed1", "flaky1"], script)
    flaky = result.groups[1]
    assert flaky.group_id == "g1.r1" and flaky.rewards == [0.0, 1.0, 0.0, 1.0]
    assert all(t.reward is not None and t.group_id == "g1.r1" for t in flaky.trajectories)
    assert sum(1 for task, gid, _ in script.calls if task == "flaky1") == 8  # whole group re-run
    assert (result.counts.refilled, result.counts.replaced, result.counts.system_errors) == (1, 0, {"engine": 1})


def test_group_failing_every_retry_is_replaced_and_reported():
    result = batch(["broken1", "mixed1", "mixed2"], Script(), system_error_retries=2)
    assert [g.task for g in result.groups] == ["mixed1", "mixed2"] and result.replaced_tasks == ["broken1"]
    c = result.counts
    assert (c.refilled, c.replaced, c.tasks_drawn, c.episodes) == (2, 1, 3, 3 * 4 + 4 + 4)
    assert c.system_errors == Counter({"endpoint_timeout": 12})
    assert c.extra_rounds == 0  # a replacement is not a dynamic-sampling round


def test_all_equal_groups_are_dropped_and_resampled():
    result = batch(["pass1", "mixed1", "fail1", "mixed2", "mixed3"], Script(), groups=3)
    assert [g.task for g in result.groups] == ["mixed1", "mixed2", "mixed3"]
    assert [(g.task, g.informative) for g in result.scored] == [  # what was run, dropped groups too
        ("pass1", False), ("mixed1", True), ("fail1", False), ("mixed2", True), ("mixed3", True)]
    c = result.counts
    assert (c.dropped_all_equal, c.resampled, c.extra_rounds, c.tasks_drawn, c.source_exhausted) == (
        2, 2, 1, 5, False)


def test_extra_rounds_are_capped_and_an_empty_batch_says_so():
    result = batch([f"pass{i}" for i in range(20)], Script(), max_extra_rounds=2)
    assert result.groups == []
    c = result.counts
    assert (c.informative, c.dropped_all_equal, c.extra_rounds, c.tasks_drawn) == (0, 6, 2, 6)


def test_exhausted_source_returns_what_it_has():
    result = batch(["mixed1", "pass1"], Script())
    assert [g.task for g in result.groups] == ["mixed1"] and result.counts.source_exhausted


def test_too_many_failing_tasks_raise_instead_of_training_on_the_rest():
    with pytest.raises(SchedulingError, match=r"4 tasks failed 2 times each .*endpoint_timeout.: 32.*limit 2"):
        batch([f"broken{i}" for i in range(10)], Script(), system_error_retries=1, max_replacements=2)


def test_concurrency_is_bounded():
    script = Script()
    batch(["mixed1", "mixed2", "mixed3"], script, groups=3, max_concurrency=3)
    assert script.max_active == 3


def test_a_bug_in_the_runner_is_not_a_system_error():
    async def buggy(task, group_id, member):
        if member == 2:
            raise KeyError("tool_calls")
        await asyncio.sleep(0.001)
        return trajectory(task, group_id, 1.0)
    with pytest.raises(KeyError, match="tool_calls"):
        batch(["mixed1", "mixed2"], buggy)


def test_runner_must_keep_the_group_id():
    async def wrong(task, group_id, member):
        return trajectory(task, "other", 1.0)
    with pytest.raises(ValueError, match="must pass it through"):
        batch(["mixed1"], wrong)


def test_same_tasks_and_outcomes_give_the_same_batch_whatever_the_timing():
    tasks = ["flaky1", "pass1", "broken1", "mixed1", "fail1", "mixed2", "flaky2", "mixed3"]

    def summary(seed):
        result = batch(tasks, Script(random.Random(seed)), groups=3, max_concurrency=5, system_error_retries=1)
        groups = [(g.task, g.group_id, g.rewards) for g in result.groups]
        return groups, result.counts, result.replaced_tasks
    first = summary(1)
    assert all(summary(seed) == first for seed in (2, 3))
    assert [task for task, _, _ in first[0]] == ["flaky1", "mixed1", "mixed2"]


def test_group_ids_stay_unique_across_batches():
    async def two_batches():
        scheduler = GroupScheduler(iter(["mixed1", "mixed2", "mixed3", "mixed4"]), Script(), GroupConfig(2, 4))
        return [[g.group_id for g in (await scheduler.next_batch()).groups] for _ in range(2)]
    assert asyncio.run(two_batches()) == [["g0", "g1"], ["g2", "g3"]]


def test_a_replacement_source_gives_a_dropped_group_a_task_like_it():
    """With a `replacement`, a dropped group's task is replaced by what it returns for that task (the trainer's
    by-kind draw: one of the same kind), not by the stream's next: here every pass* stays out of the batch."""
    likes = {"fail1": "fail2", "fail2": "mixed7", "pass1": "pass2", "pass2": "pass3"}
    asked = []

    def like(task: str) -> str:
        asked.append(task)
        return likes[task]
    config = GroupConfig(groups=3, group_size=4, max_extra_rounds=2)
    result = asyncio.run(GroupScheduler(iter(["fail1", "mixed1", "pass1", "mixed2"]), Script(), config,
                                        replacement=like).next_batch())
    assert [g.task for g in result.groups] == ["mixed1", "mixed7"]  # the stream's mixed2 never ran
    assert asked == ["fail1", "pass1", "fail2", "pass2"]
    assert [g.group_id for g in result.scored] == ["g0", "g1", "g2", "g3", "g4", "g5", "g6"]
    c = result.counts
    assert (c.dropped_all_equal, c.resampled, c.extra_rounds, c.tasks_drawn) == (5, 4, 2, 7)

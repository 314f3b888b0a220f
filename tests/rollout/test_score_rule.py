"""The one score rule (rollout.score_rule): the shaped score computed by hand, and the group scheduler's filter
and the batch producer's measurement asking the same rule, so that a group of equal verdicts of which one
episode was cut short is kept under overlong=penalty (its shaped scores differ) and dropped where the rule
leaves the verdicts alone."""

import asyncio

import pytest

from rollout.batch_producer import BatchProducer, ConsumedBatch
from rollout.score_rule import VERDICT, ScoreRule, cut_short
from rollout.trajectory import Trajectory
from tests.rollout.score_rule_support import BUDGET, GROUP_SIZE, PENALTY, scheduled, scheduler

BUFFER = 10
SHAPED = ScoreRule(format_penalty=0.25, overlong="penalty", token_budget=BUDGET, overlong_penalty=0.5,
                   overlong_buffer=BUFFER)


def episode(reward: float | None = 1.0, length: int = 20, malformed: int = 0, **fields) -> Trajectory:
    return Trajectory(**{"task_id": "t", "group_id": "g", "token_ids": [1] * length, "loss_mask": [1] * length,
                         "logprobs": [0.0] * length, "weight_versions": ["0"], "reward": reward,
                         "termination": "agent_done", "malformed": {"unknown_tool": malformed} if malformed else {},
                         **fields})


@pytest.mark.parametrize(("trajectory", "score"), [
    (episode(), 1.0),
    (episode(malformed=2), 0.5),  # 0.25 per malformed call
    (episode(malformed=5), 0.0),  # at most 1 in all: a pass never scores below a clean failure
    (episode(0.0, malformed=1), -0.25),
    (episode(termination="token_budget"), 0.5),  # cut short: loses the whole overlong penalty
    (episode(truncated_turns=1), 0.5),  # a turn cut at max_tokens_per_turn
    (episode(malformed=1, termination="token_budget"), 0.25),
    (episode(length=BUDGET - BUFFER), 1.0),  # up to the buffer: nothing
    (episode(length=BUDGET - BUFFER // 2), 0.75),  # half-way into the buffer: half the penalty
])
def test_the_score_is_the_verdict_less_the_format_penalty_and_the_overlong_rule(trajectory, score) -> None:
    assert SHAPED.score(trajectory) == pytest.approx(score)
    assert SHAPED.trains(trajectory)


def test_other_overlong_modes_score_the_verdict_and_mask_takes_the_cut_episode_out_of_the_loss() -> None:
    cut = episode(termination="token_budget", length=BUDGET)
    assert cut_short(cut) and VERDICT.score(cut) == 1.0 and VERDICT.trains(cut)
    masked = ScoreRule(overlong="mask", token_budget=BUDGET)
    assert masked.score(cut) == 1.0 and not masked.trains(cut) and masked.trains(episode())


def test_an_episode_without_a_reward_is_never_scored() -> None:
    with pytest.raises(ValueError, match="no reward .*'engine'.*never scored"):
        VERDICT.score(episode(None, system_error="engine"))


@pytest.mark.parametrize(("rule", "kept"), [(PENALTY, True), (VERDICT, False),
                                            (ScoreRule(overlong="mask", token_budget=BUDGET), False)])
def test_the_scheduler_keeps_equal_verdicts_with_one_cut_short_where_the_rule_shapes_them(rule, kept) -> None:
    """Informative means the shaped scores differ (ScoreRule's docstring): the overlong penalty tells the cut
    episode apart, so the group is kept for the packer to push it down; the verdicts alone, or masking (which
    keeps the score), leave nothing to tell apart, and the group is dropped."""
    batch = scheduled(rule)
    (group,) = batch.scored
    assert group.rewards == [1.0] * GROUP_SIZE and group.score_rule is rule
    assert group.scores == ([0.5] if kept else [1.0]) + [1.0] * (GROUP_SIZE - 1)
    assert batch.groups == ([group] if kept else [])
    assert (batch.counts.informative, batch.counts.dropped_all_equal) == ((1, 0) if kept else (0, 1))


def consumed(version: str) -> ConsumedBatch[str]:
    """Batch 1 of a producer whose update starts from step 1's weights (no staleness allowed), its episodes
    sampled under weight version `version` by a scheduler keeping by the overlong penalty."""
    groups = scheduler(PENALTY, version)

    async def take() -> ConsumedBatch[str]:
        producer = BatchProducer(lambda _: groups.next_batch(), lambda: groups.draws, max_staleness=0, first=1,
                                 last=1, served=1)
        try:
            return await producer.take(1)
        finally:
            await producer.close()
    return asyncio.run(take())


def test_the_batch_producer_measures_the_groups_the_rule_kept() -> None:
    """The producer's staleness check acts on the groups the scheduler's rule kept: a fresh one is trained on,
    a stale one dropped and counted, though its verdicts alone would call it signal-free."""
    fresh, stale = consumed("1"), consumed("0")
    assert len(fresh.batch.groups) == fresh.batch.counts.informative == 1 and fresh.too_old == 0
    assert fresh.staleness == {0: GROUP_SIZE}
    assert stale.batch.groups == [] and stale.batch.counts.informative == 0 and stale.too_old == 1
    assert stale.staleness == {1: GROUP_SIZE} and len(stale.batch.scored) == 1

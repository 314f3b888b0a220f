"""A group whose verdicts are all equal and one of whose episodes was cut short, through the real group scheduler:
what the score rule's overlong penalty tells apart and the verdicts cannot (the rule's tests in rollout, the
trainer's packing)."""

import asyncio

from rollout.groups import Batch, EpisodeRunner, GroupConfig, GroupScheduler
from rollout.score_rule import ScoreRule
from rollout.trajectory import Trajectory

GROUP_SIZE = 4
BUDGET = 64  # the episodes' token budget: what member 0's conversation runs into
PROMPT = 8  # tokens of each conversation before the policy's
PENALTY = ScoreRule(overlong="penalty", token_budget=BUDGET, overlong_penalty=0.5)


def one_cut_short(version: str = "0") -> EpisodeRunner[str]:
    """Episodes that all pass, sampled under weight version `version`; member 0 ran out of its token budget
    before it ended, the others ended at half of it."""
    async def episode(task: str, group_id: str, member: int) -> Trajectory:
        await asyncio.sleep(0)
        length = BUDGET if member == 0 else BUDGET // 2
        return Trajectory(task_id=task, group_id=group_id, token_ids=list(range(1, length + 1)),
                          loss_mask=[0] * PROMPT + [1] * (length - PROMPT),
                          logprobs=[0.0] * PROMPT + [-0.5] * (length - PROMPT), weight_versions=[version],
                          reward=1.0, termination="token_budget" if member == 0 else "agent_done")
    return episode


def scheduler(score_rule: ScoreRule, version: str = "0") -> GroupScheduler[str]:
    """A scheduler of one group per batch (no resampling) of `one_cut_short` episodes, keeping by `score_rule`."""
    config = GroupConfig(groups=1, group_size=GROUP_SIZE, max_extra_rounds=0)
    return GroupScheduler(iter(["task0"]), one_cut_short(version), config, score_rule=score_rule)


def scheduled(score_rule: ScoreRule) -> Batch[str]:
    """The one batch `scheduler(score_rule)` fills."""
    return asyncio.run(scheduler(score_rule).next_batch())

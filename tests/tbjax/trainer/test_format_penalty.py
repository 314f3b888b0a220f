"""The format penalty through real episodes and the trainer's packing: a group in which every episode passes,
half of them after a malformed tool call (an unknown tool, answered with an error, then the right calls),
is signal-free by its verdicts; with `grpo.format_penalty` (the objective's score rule, which the scheduler and
the packer share) it is informative, and the episodes that wrote the malformed call are the ones GRPO pushes
down. The setting lived in `groups` before: that key names its new place."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from envs import load_tasks, open_session
from rollout.engines.protocol import Generation, SamplingParams
from rollout.episode import EpisodeConfig, run_episode
from rollout.groups import GroupConfig, GroupScheduler
from rollout.interpret import Interpreter
from rollout.oracle import OracleEngine
from rollout.trajectory import Trajectory
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tbjax.config import ConfigError, load_config
from tbjax.sections.training import GRPOSection
from tbjax.trainer.packing import batch_from_groups

GROUP = 4
MALFORMED = '<tool_call>\n{"name": "renew_everything", "arguments": {}}\n</tool_call>'
LIMITS = EpisodeConfig(max_turns=12, max_tokens_per_turn=256, token_budget=8000)


class StumblingOracle(OracleEngine):
    """The oracle, except that odd members first write a call to a tool that does not exist."""

    def __init__(self, interpreter: Interpreter) -> None:
        super().__init__(interpreter)
        self.stumble = tuple(interpreter.encode(MALFORMED) + [interpreter.end_of_turn_id])
        self.yet_to_stumble: set[str] = set()

    def expect_member(self, session_id: str, task, member: int) -> None:
        self.expect(session_id, task)
        if member % 2:
            self.yet_to_stumble.add(session_id)

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        if session_id in self.yet_to_stumble:
            self.yet_to_stumble.discard(session_id)
            return Generation(self.stumble, (0.0,) * len(self.stumble), "stop", "oracle", len(input_ids))
        return await super().generate(input_ids, sampling, session_id=session_id)


@pytest.fixture(scope="module")
def interpreter(tmp_path_factory) -> Interpreter:
    return Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path_factory.mktemp("tok")))


def run_group(interpreter: Interpreter, format_penalty: float):
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_loan")
    engine = StumblingOracle(interpreter)

    async def episode(task_, group_id: str, member: int) -> Trajectory:
        session_id = f"{group_id}/{member}"
        engine.expect_member(session_id, task_, member)
        result = await run_episode(task_, engine, interpreter, group_id=group_id, config=LIMITS,
                                   opener=open_session, session_id=session_id)
        return result.trajectory

    config = GroupConfig(groups=1, group_size=GROUP, max_concurrency=GROUP, max_extra_rounds=0)
    rule = GRPOSection(format_penalty=format_penalty).score_rule(LIMITS.token_budget)
    return asyncio.run(GroupScheduler(iter([task]), episode, config, score_rule=rule).next_batch())


def test_passes_that_stumbled_are_scored_below_clean_ones_and_pushed_down(interpreter) -> None:
    batch = run_group(interpreter, format_penalty=0.25)
    (group,) = batch.scored
    assert group.rewards == [1.0] * GROUP  # every episode passed: the verdict cannot tell them apart
    assert [t.malformed for t in group.trajectories] == [{}, {"unknown_tool": 1}] * (GROUP // 2)
    assert group.scores == [1.0, 0.75] * (GROUP // 2) and batch.groups == [group]
    assert batch.counts.reward_sum == GROUP  # the pass rate still counts verdicts

    packed = batch_from_groups([group.trajectories], GRPOSection(), 8192, 1, score_rule=group.score_rule)
    assert packed is not None
    advantages, mask = packed.arrays["advantages"], packed.arrays["mask"] != 0
    stumbled = sum(sum(t.loss_mask[1:]) for t in group.trajectories[1::2])
    clean = sum(sum(t.loss_mask[1:]) for t in group.trajectories[0::2])
    assert np.count_nonzero(mask & (advantages < 0)) == stumbled
    assert np.count_nonzero(mask & (advantages > 0)) == clean


def test_without_the_penalty_the_same_group_is_dropped(interpreter) -> None:
    batch = run_group(interpreter, format_penalty=0.0)
    assert batch.groups == [] and batch.counts.dropped_all_equal == 1
    assert batch_from_groups([batch.scored[0].trajectories], GRPOSection(), 8192, 1) is None


@pytest.mark.parametrize("penalty", [-0.1, 1.5])
def test_a_penalty_outside_the_unit_interval_is_refused(penalty) -> None:
    with pytest.raises(ValueError, match=r"grpo.format_penalty=.* is outside \[0, 1\]"):
        GRPOSection(format_penalty=penalty)


def test_the_old_key_names_the_new_one_and_the_fingerprint_keeps_the_penalty() -> None:
    with pytest.raises(ConfigError, match=r"did you mean grpo.format_penalty\? groups.format_penalty is its old"):
        load_config(overrides=["groups.format_penalty=0.2"])
    penalised = load_config(overrides=["grpo.format_penalty=0.2"])  # the default config's is 1.0
    assert penalised.grpo.score_rule(100).format_penalty == 0.2
    assert penalised.fingerprint() != load_config().fingerprint()
    assert load_config(overrides=["grpo.format_penalty=0"]).fingerprint() != penalised.fingerprint()

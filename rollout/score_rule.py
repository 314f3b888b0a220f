"""The score GRPO compares within a group, defined once: `ScoreRule`. The objective owns it (tbjax's `grpo`
section builds it), and the group scheduler's filter (`Group.informative`), the batch producer's measurement
and the trainer's packing (advantages, and which episodes train) all ask this one object.

An episode's shaped score is its verdict, less a penalty per malformed tool call, less what the overlong rule
takes from an episode cut short. An episode is cut short when its token budget ran out or a turn hit
max_tokens_per_turn before it ended: its verdict then grades a conversation the policy never finished, so a 0
there says "too long" as much as "wrong", and a pass can reward rambling that happened to fit. Three overlong
rules (DAPO's overlong shaping, for multi-turn episodes):

- none: the verdict alone, as for any episode (the default; the seed's recipe).
- mask: DAPO's overlong filtering. The episode's score still counts in its group's baseline, but its tokens
  leave the loss: the policy is not pushed either way on a conversation it did not finish.
- penalty: DAPO's soft overlong punishment. A cut episode's score loses `overlong_penalty`; an uncut one whose
  conversation came within `overlong_buffer` tokens of the budget loses a share of it growing linearly to the
  budget, so GRPO prefers the shorter of two equal verdicts before the cut.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from rollout.trajectory import Trajectory

OverlongMode = Literal["none", "mask", "penalty"]


def cut_short(trajectory: Trajectory) -> bool:
    """Whether the episode ended by its token budget or holds a turn cut at max_tokens_per_turn."""
    return trajectory.termination == "token_budget" or trajectory.truncated_turns > 0


@dataclasses.dataclass(frozen=True)
class ScoreRule:
    """The shaped score of an episode (`score`), whether a group's episodes can be told apart by it
    (`informative`) and whether an episode's tokens are in the loss (`trains`). The default rule is the verdict
    alone. Pass rates count the verdict alone, whatever the rule.

    Informative means the shaped scores differ, not only the verdicts (DAPO's dynamic-sampling rule): the
    advantages come from the shaped scores, so a group of equal verdicts whose shaping differs (passes of which
    some wrote malformed calls, or equal verdicts of which one was cut short under overlong=penalty) has a
    gradient, and dropping it would throw away exactly the signal the shaping exists to give. A group of equal
    shaped scores has zero advantage everywhere and is dropped. With no format penalty and overlong none or mask
    the shaped score is the verdict, and the two rules are the same.
    """

    # score lost per malformed tool call, at most 1 in all (a pass never scores below a clean failure). The
    # verdict ignores a call the agent got wrong and then repeated correctly, so without it nothing in GRPO
    # discourages them
    format_penalty: float = 0.0
    overlong: OverlongMode = "none"
    token_budget: int = 0  # the episode's budget: where the soft overlong penalty reaches `overlong_penalty`
    overlong_penalty: float = 1.0
    overlong_buffer: int = 0  # tokens before the budget over which the soft overlong penalty ramps up

    def score(self, trajectory: Trajectory) -> float:
        """The episode's shaped score (module docstring)."""
        if trajectory.reward is None:
            raise ValueError(f"episode {trajectory.task_id} of group {trajectory.group_id} has no reward (system "
                             f"error {trajectory.system_error!r}): it is never scored")
        score = trajectory.reward - min(1.0, self.format_penalty * trajectory.malformed_tool_calls)
        if self.overlong != "penalty":
            return score
        if cut_short(trajectory):
            return score - self.overlong_penalty
        start = self.token_budget - self.overlong_buffer
        length = len(trajectory.token_ids)
        if self.overlong_buffer and length > start:
            return score - self.overlong_penalty * (length - start) / self.overlong_buffer
        return score

    def informative(self, trajectories: Sequence[Trajectory]) -> bool:
        """Whether the group's shaped scores differ (why shaped, not verdicts: the class docstring)."""
        return len({self.score(t) for t in trajectories}) > 1

    def trains(self, trajectory: Trajectory) -> bool:
        """Whether the episode's tokens are in the loss."""
        return self.overlong != "mask" or not cut_short(trajectory)


VERDICT = ScoreRule()  # the verdict alone: no format penalty, no overlong shaping

"""What an episode cut short gets in GRPO's comparison (DAPO's overlong shaping, for multi-turn episodes).

An episode is cut short when its token budget ran out or a turn hit max_tokens_per_turn before it ended: its
verdict then grades a conversation the policy never finished, so a 0 there says "too long" as much as
"wrong", and a pass can reward rambling that happened to fit. Three rules:

- none: the verdict alone, as for any episode (the default; the seed's recipe).
- mask: DAPO's overlong filtering. The episode's score still counts in its group's baseline, but its tokens
  leave the loss: the policy is not pushed either way on a conversation it did not finish.
- penalty: DAPO's soft overlong punishment. A cut episode's score loses `penalty`; an uncut one whose
  conversation came within `buffer` tokens of the budget loses a share of it growing linearly to the budget,
  so GRPO prefers the shorter of two equal verdicts before the cut.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from rollout.trajectory import Trajectory

OverlongMode = Literal["none", "mask", "penalty"]


def cut_short(trajectory: Trajectory) -> bool:
    """Whether the episode ended by its token budget or holds a turn cut at max_tokens_per_turn."""
    return trajectory.termination == "token_budget" or trajectory.truncated_turns > 0


@dataclasses.dataclass(frozen=True)
class OverlongRule:
    mode: OverlongMode
    token_budget: int  # the episode's budget: where the soft penalty reaches `penalty`
    penalty: float = 1.0
    buffer: int = 0  # tokens before the budget over which the soft penalty ramps up

    def score(self, trajectory: Trajectory, format_penalty: float) -> float:
        """The episode's score under this rule (Trajectory.score, less the overlong penalty where it applies)."""
        score = trajectory.score(format_penalty)
        if self.mode != "penalty":
            return score
        if cut_short(trajectory):
            return score - self.penalty
        start = self.token_budget - self.buffer
        length = len(trajectory.token_ids)
        return score - self.penalty * (length - start) / self.buffer if self.buffer and length > start else score

    def trains(self, trajectory: Trajectory) -> bool:
        """Whether the episode's tokens are in the loss."""
        return self.mode != "mask" or not cut_short(trajectory)

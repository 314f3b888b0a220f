"""The trajectory contract: what one episode hands the trainer."""

from __future__ import annotations

import dataclasses

from envs.session import Termination
from rollout.interpret import MalformedKind

__all__ = ["Termination", "Trajectory"]


@dataclasses.dataclass
class Trajectory:
    """token_ids is the whole conversation as the policy saw it; loss_mask is 1 exactly on tokens the
    policy sampled, whose behaviour log-probs are in `logprobs` (0.0 elsewhere)."""

    task_id: str
    group_id: str
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    weight_versions: list[str]  # one per agent turn, in order (a publish may reach the engine between turns)
    reward: float | None  # None when a system error voided the episode
    termination: Termination
    system_error: str | None = None  # the error's kind, e.g. "engine", "endpoint_timeout"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0
    truncated_turns: int = 0  # turns that hit max_tokens_per_turn (or the budget) before their end
    # prompt tokens prefilled again because a publish between turns emptied the prefix cache holding them
    reprefilled_tokens: int = 0
    malformed: dict[MalformedKind, int] = dataclasses.field(default_factory=dict)  # tool calls, by kind
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not len(self.token_ids) == len(self.loss_mask) == len(self.logprobs):
            raise ValueError("token_ids, loss_mask and logprobs must have one entry per token")

    @property
    def malformed_tool_calls(self) -> int:
        return sum(self.malformed.values())

    @property
    def weight_version(self) -> str | None:
        """The version the first agent turn was sampled with (what on-policy checks compare)."""
        return self.weight_versions[0] if self.weight_versions else None

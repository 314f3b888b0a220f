"""The growing token sequence of one episode, with its loss mask and behaviour log-probs.

Only what the policy sampled is trained on (mask 1, its log-prob kept); prompts, deltas and the closing
token of a truncated turn are context (mask 0, log-prob 0.0). The lists map one to one onto Trajectory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass
class TokenSequence:
    token_ids: list[int] = dataclasses.field(default_factory=list)
    loss_mask: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)

    def add_context(self, token_ids: Sequence[int]) -> None:
        """Tokens the policy did not sample (first prompt, deltas)."""
        self.token_ids.extend(token_ids)
        self.loss_mask.extend([0] * len(token_ids))
        self.logprobs.extend([0.0] * len(token_ids))

    def add_sampled(self, token_ids: Sequence[int], logprobs: Sequence[float]) -> None:
        """Tokens the policy sampled, exactly as the engine returned them, with their behaviour log-probs."""
        if len(token_ids) != len(logprobs):
            raise ValueError(f"{len(token_ids)} sampled ids but {len(logprobs)} log-probs")
        self.token_ids.extend(token_ids)
        self.loss_mask.extend([1] * len(token_ids))
        self.logprobs.extend(logprobs)

    def __len__(self) -> int:
        return len(self.token_ids)

    def cut_context_after(self, length: int) -> None:
        """Drops the context tokens past `length` (an episode that ran out of budget on a tool or user reply
        keeps it within the budget: the policy never conditions on that tail, so it trains nothing)."""
        if any(self.loss_mask[length:]):
            raise ValueError(f"cannot cut sampled tokens: the sequence samples past position {length}")
        del self.token_ids[length:], self.loss_mask[length:], self.logprobs[length:]

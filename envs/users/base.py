"""The interface every user simulator offers the episode loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

STOP_MARKER = "###STOP###"


@dataclass(frozen=True)
class UserTurn:
    text: str
    done: bool  # the user ends the conversation after this message


class UserSimulator(Protocol):
    def opening(self) -> str:
        """The user's first message."""
        ...

    async def reply(self, agent_text: str) -> UserTurn:
        """The user's answer to the agent's latest message."""
        ...

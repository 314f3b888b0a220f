"""A deterministic user driven only by the task scenario: the CPU default and the user of tests.

Each agent message is read in this order:
1. it asks (a "?" or a request cue) for facts the user knows (fact keywords) -> exactly those facts;
2. it asks for something the user does not know -> the user says so;
3. it asks a question (a confirmation or anything ending in "?") -> yes, or no if the scenario declines;
4. otherwise it is a statement (the agent reports success or a refusal) -> the user stops.
A turn cap stops users whose agent never concludes.
"""

from __future__ import annotations

from envs.judges.rules import normalise
from envs.tasks import UserScenario
from envs.users.base import STOP_MARKER, UserTurn

_CONFIRMATION_CUES = ("confirm", "proceed", "go ahead", "shall i", "should i", "would you like", "do you want")
_REQUEST_CUES = ("provide", "give me", "tell me", "share", "confirm", "could you", "can you", "may i have",
                 "i need", "please enter", "what is", "what s")


class ScriptedUser:
    def __init__(self, scenario: UserScenario, max_turns: int = 12) -> None:
        self.scenario = scenario
        self.max_turns = max_turns
        self._turns = 0

    def opening(self) -> str:
        return self.scenario.opening

    async def reply(self, agent_text: str) -> UserTurn:
        self._turns += 1
        if self._turns > self.max_turns:
            return UserTurn(f"I have to go now. {STOP_MARKER}", done=True)
        text = f" {normalise(agent_text)} "
        question = "?" in agent_text
        if question or any(f" {cue} " in text for cue in _REQUEST_CUES):
            asked = [f for f in self.scenario.facts if any(f" {normalise(k)} " in text for k in f.keywords)]
            if asked:
                return UserTurn(" ".join(f"My {f.name} is {f.value}." for f in asked), done=False)
            unknown = [topic for topic in self.scenario.unknown if f" {normalise(topic)} " in text]
            if unknown:
                return UserTurn(f"Sorry, I don't know my {unknown[0]}.", done=False)
        if question or any(f" {cue} " in text for cue in _CONFIRMATION_CUES):
            if self.scenario.confirms:
                return UserTurn("Yes, please go ahead.", done=False)
            return UserTurn(f"No, please don't. {STOP_MARKER}", done=True)
        return UserTurn(f"Thank you, that's all. {STOP_MARKER}", done=True)

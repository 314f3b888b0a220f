"""A user played by an LLM through an OpenAI-compatible endpoint, prompted from the task scenario.

The agent's text is untrusted input to the user model: before it is shown, anything that looks like the
stop marker, our scenario delimiters or chat-template role tokens is neutralised, so an agent cannot end
the conversation or rewrite the user's instructions by typing them.
"""

from __future__ import annotations

import re

from envs.chat_endpoint import ChatClient
from envs.tasks import UserScenario
from envs.users.base import STOP_MARKER, UserTurn

_INJECTION = re.compile(
    r"#{2,}\s*stop\s*#{2,}|<{2,}/?\s*scenario\s*>{2,}|<\|[^|>]{1,40}\|>|</?(system|user|assistant)>",
    re.IGNORECASE,
)


def sanitise_agent_text(text: str) -> str:
    """Neutralise the stop marker, scenario delimiters and role tokens in the agent's message."""
    return _INJECTION.sub("[removed]", text)


def scenario_prompt(scenario: UserScenario) -> str:
    facts = "\n".join(f"- {f.name}: {f.value}" for f in scenario.facts) or "- (none)"
    unknown = ", ".join(scenario.unknown) or "(nothing listed)"
    return (
        "You are role-playing a customer talking to a support agent. Stay in character.\n"
        "<<SCENARIO>>\n"
        f"Persona: {scenario.persona}\n"
        f"Your goal: {scenario.goal}\n"
        f"Facts you know and may share when asked:\n{facts}\n"
        f"Things you do not know (say so if asked): {unknown}\n"
        f"If the agent asks you to confirm an action, answer {'yes' if scenario.confirms else 'no'}.\n"
        "<</SCENARIO>>\n"
        "Rules: never invent facts that are not listed; reveal a fact only when asked for it; keep replies short. "
        f"When your goal is met, or the agent clearly refuses it, reply with {STOP_MARKER} at the end."
    )


class LlmUser:
    def __init__(self, scenario: UserScenario, client: ChatClient, temperature: float = 0.3) -> None:
        self.scenario = scenario
        self._client = client
        self._temperature = temperature
        # From the user model's side the agent speaks as "user" and the simulated customer as "assistant".
        self._messages = [
            {"role": "system", "content": scenario_prompt(scenario)},
            {"role": "assistant", "content": scenario.opening},
        ]

    def opening(self) -> str:
        return self.scenario.opening

    async def reply(self, agent_text: str) -> UserTurn:
        self._messages.append({"role": "user", "content": sanitise_agent_text(agent_text)})
        text = await self._client.complete(self._messages, temperature=self._temperature)
        self._messages.append({"role": "assistant", "content": text})
        done = STOP_MARKER in text
        return UserTurn(text.replace(STOP_MARKER, "").strip(), done=done)

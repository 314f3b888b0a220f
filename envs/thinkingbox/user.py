"""The simulated user of a ThinkingBox task: an LLM behind an OpenAI-compatible endpoint, prompted with the
task's query (its first message, already sent) and user_context (who it is, what it knows, how to behave).

Why not `envs.users.LlmUser` as is: its prompt is built from a `UserScenario` and tells the user to answer
every confirmation with one fixed yes/no, while dozens of ThinkingBox contexts say when to decline (a
cancellation, a loaner device, a wrong refund). This user keeps LlmUser's safeguards (the agent's text is
sanitised; `###STOP###` ends the conversation) and lets user_context alone decide.
"""

from __future__ import annotations

from envs.chat_endpoint import ChatClient
from envs.users.base import STOP_MARKER, UserTurn
from envs.users.llm import sanitise_agent_text


def user_prompt(query: str, user_context: str) -> str:
    return (
        "You play a person who contacts a support agent. Stay in character; write only that person's messages.\n"
        "<<SCENARIO>>\n"
        f"Your first message, already sent:\n{query}\n\n"
        f"Who you are, what you know and how you behave:\n{user_context}\n"
        "<</SCENARIO>>\n"
        "Share only details written in the scenario, and only when the agent asks for them; never invent data; "
        "keep replies short. When the scenario says how to react to an offer or question, do exactly that. "
        f"End your message with {STOP_MARKER} when your request is resolved, when the agent clearly cannot "
        "help, or when the scenario tells you to stop."
    )


class ThinkingBoxUser:
    def __init__(self, query: str, user_context: str, client: ChatClient, temperature: float = 0.3) -> None:
        self.query = query
        self._client = client
        self._temperature = temperature
        # From the user model's side the agent speaks as "user" and the simulated person as "assistant".
        self._messages = [{"role": "system", "content": user_prompt(query, user_context)},
                          {"role": "assistant", "content": query}]

    def opening(self) -> str:
        return self.query

    async def reply(self, agent_text: str) -> UserTurn:
        self._messages.append({"role": "user", "content": sanitise_agent_text(agent_text)})
        text = await self._client.complete(self._messages, temperature=self._temperature)
        self._messages.append({"role": "assistant", "content": text})
        return UserTurn(text.replace(STOP_MARKER, "").strip(), done=STOP_MARKER in text)

"""τ²-bench's simulated user on any OpenAI-compatible endpoint: τ²'s user system prompt (its simulation
guidelines and the task's scenario, built by the worker) and, in telecom, τ²'s user device tools.

The user's tool calls run on the episode's live environment through the worker (requestor "user"), so τ²'s
evaluator replays them. The user's turn ends when it answers in words; `###STOP###`, `###TRANSFER###` and
`###OUT-OF-SCOPE###` end the episode as τ²'s orchestrator ends it. The agent's text is sanitised before the
user model sees it (an agent cannot end the conversation by typing a stop marker). An endpoint that fails, or a
user that calls tools without end or with arguments that are not JSON, is an infrastructure fault (an
`EndpointError`): the episode is voided, never scored 0.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from envs.chat_endpoint import ChatClient
from envs.errors import EndpointError
from envs.users.base import UserTurn
from envs.users.llm import sanitise_agent_text

STOP_MARKERS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
# runs one user tool call on the episode's environment: (name, arguments) -> (content, error)
UserToolRunner = Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]]


class Tau2User:
    def __init__(self, client: ChatClient, system_prompt: str, tools: list[dict[str, Any]] | None,
                 run_tool: UserToolRunner, temperature: float, max_tool_calls: int) -> None:
        self._client, self._tools, self._run_tool = client, tools, run_tool
        self._temperature, self._max_tool_calls = temperature, max_tool_calls
        # From the user model's side the agent speaks as "user" and the simulated customer as "assistant".
        self._messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]

    async def respond(self, agent_text: str, *, trusted: bool = False) -> UserTurn:
        """The user's answer to the agent's message (`trusted`: τ²'s own greeting, shown as it is)."""
        self._messages.append({"role": "user", "content": agent_text if trusted else sanitise_agent_text(agent_text)})
        for _ in range(self._max_tool_calls + 1):
            message = await self._complete()
            calls = message.get("tool_calls") or []
            if not calls:
                text = message.get("content")
                if not isinstance(text, str):
                    raise EndpointError(f"the user simulator answered neither text nor tool calls: {message!r}",
                                        kind="endpoint_protocol")
                self._messages.append({"role": "assistant", "content": text})
                return UserTurn(text, done=any(marker in text for marker in STOP_MARKERS))
            self._messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for call in calls:
                name, arguments = parse_call(call)
                content, _ = await self._run_tool(name, arguments)
                self._messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
        raise EndpointError(f"the user simulator made more than {self._max_tool_calls} tool calls without "
                            "answering the agent", kind="user_tool_loop")

    async def _complete(self) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": self._messages, "temperature": self._temperature}
        if self._tools:
            body["tools"] = self._tools
        return (await self._client.completion(body))["choices"][0]["message"]


def parse_call(call: Any) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of an OpenAI tool call; anything else is the endpoint breaking protocol."""
    try:
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        if isinstance(function["name"], str) and isinstance(arguments, dict):
            return function["name"], arguments
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError):
        pass
    raise EndpointError(f"the user simulator sent a malformed tool call: {str(call)[:300]}", kind="endpoint_protocol")

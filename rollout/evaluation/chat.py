"""A chat-level episode for API models (OpenAI-compatible function calling), for evaluation only.

An API model gives no token ids or log-probs, so it cannot use the token-level episode loop; this loop works
on messages instead: the environment's system messages and the user's opening, then per agent turn one
`/chat/completions` call with the tools; `tool_calls` run through the session's MCP client (arguments checked
against the tool schemas like ours, bad ones answered as tool errors), plain text goes to the simulated user.
There is no end-of-text token in a chat API, so the episode ends when the user stops, at max_turns or when the
API's reported prompt exceeds the token budget. Usage comes from the API's `usage` (cached and reasoning
tokens from its `*_details` when reported). Endpoint failures after retries, like every failure in
`rollout.failures.INFRASTRUCTURE_ERRORS`, are system errors, never failures of the agent; any other exception
is a bug and stops the campaign, the session closed first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from envs import EnvSystemError, Task, open_session
from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.errors import ConfigError, EndpointError
from rollout.episode import EpisodeConfig, SessionOpener
from rollout.evaluation.runner import TrialRunner, verdict_lines
from rollout.failures import INFRASTRUCTURE_ERRORS, closes_on_error, system_error_kind
from rollout.interpret import ToolCall, ToolCatalog, malformed_message, tool_message
from rollout.interpret.calls import MalformedCall, RawCall
from rollout.records import TrialRecord, Usage
from rollout.trajectory import Termination


@dataclasses.dataclass(frozen=True)
class ChatAgentConfig:
    endpoint: ChatEndpointConfig  # the API, its key's variable, its timeout and retries (envs.http_retry)
    episode: EpisodeConfig = EpisodeConfig()


class AgentEndpointError(EnvSystemError):
    """The agent's API failed after all retries (or answered something unusable): a system error."""

    kind = "agent_endpoint"


class ChatAgent:
    """The API model behind an OpenAI-compatible /chat/completions, called with the session's tools."""

    def __init__(self, config: ChatAgentConfig, client: ChatClient) -> None:
        self.config = config
        self._client = client

    @classmethod
    def from_config(cls, config: ChatAgentConfig, environ: Mapping[str, str] = os.environ) -> ChatAgent:
        try:
            return cls(config, ChatClient.from_config(config.endpoint, environ))
        except ConfigError as error:  # a command-line run: the message, not a traceback
            raise SystemExit(str(error)) from error

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One completion: the whole response body. What still fails after the endpoint's retries raises
        AgentEndpointError (the agent's API, told apart from the user simulator's and the judge's)."""
        e = self.config.episode
        body = {"messages": messages, "tools": tools, "temperature": e.temperature, "top_p": e.top_p,
                "max_tokens": e.max_tokens_per_turn}
        try:
            return await self._client.completion(body)
        except EndpointError as error:
            raise AgentEndpointError(str(error)) from error

    async def aclose(self) -> None:
        await self._client.aclose()


def _add_usage(usage: Usage, reported: dict[str, Any] | None) -> None:
    reported = reported or {}
    usage.prompt_tokens += int(reported.get("prompt_tokens") or 0)
    usage.completion_tokens += int(reported.get("completion_tokens") or 0)
    usage.cached_tokens += int((reported.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    usage.reasoning_tokens += int((reported.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)


def _resolve(call: dict[str, Any], catalog: ToolCatalog) -> ToolCall | MalformedCall:
    """An API tool call checked like our own policy's: unknown tools, arguments that are not a JSON object or
    that do not fit the schema become malformed calls, answered as tool errors."""
    function = call.get("function") or {}
    name, text = str(function.get("name")), function.get("arguments") or "{}"
    raw = json.dumps(call, ensure_ascii=False)
    try:
        arguments = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as error:
        arguments, problem = None, f"not valid JSON ({error})"
    else:
        problem = "not a JSON object"
    if not isinstance(arguments, dict):
        return MalformedCall("bad_json", f"the arguments of {name!r} are {problem}; send them as one JSON object.",
                             raw, name)
    return catalog.resolve(RawCall(name, arguments, False, raw))


async def _conversation(session: Any, agent: ChatAgent, usage: Usage,
                        state: dict[str, Any]) -> Termination:
    """Runs the episode; returns its termination and keeps the agent's last text reply and its count of
    malformed tool calls in `state`."""
    config = agent.config
    catalog = ToolCatalog(session.tool_schemas)
    messages: list[dict[str, Any]] = [*session.system_messages, {"role": "user", "content": session.opening()}]
    while True:
        if state["turns"] >= config.episode.max_turns:
            return "max_turns"
        answer = await agent.complete(messages, session.tool_schemas)
        state["turns"] += 1
        _add_usage(usage, answer.get("usage"))
        message = answer["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content") or "",
                         **({"tool_calls": calls} if calls else {})})
        if (answer.get("usage") or {}).get("prompt_tokens", 0) >= config.episode.token_budget:
            return "token_budget"
        if calls:
            for call in calls:
                resolved = _resolve(call, catalog)
                if isinstance(resolved, ToolCall):
                    reply = tool_message(await session.call_tool(resolved.name, resolved.arguments))
                else:
                    reply = malformed_message(resolved)
                    state["malformed"] += 1
                messages.append({**reply, "tool_call_id": call.get("id", "")})
            continue
        state["last_reply"] = message.get("content") or ""
        user = await session.user_reply(state["last_reply"])
        if user.done:
            return "user_done"
        messages.append({"role": "user", "content": user.text})


def chat_trial_runner(agent: ChatAgent, *, opener: SessionOpener | None = None,
                      model_name: str | None = None) -> TrialRunner:
    """Trials of the API model behind `agent`, recorded as `model_name` (default: the API's model name)."""
    config, open_ = agent.config, opener or open_session

    async def trial(task: Task, index: int) -> TrialRecord:
        start, usage, state = time.perf_counter(), Usage(), {"turns": 0, "last_reply": None, "malformed": 0}
        error: str | None = None
        verdict = None
        termination: Termination = "system_error"
        try:
            session = await open_(task)
        except INFRASTRUCTURE_ERRORS as exc:
            error = system_error_kind(exc, "environment")
        else:
            async with closes_on_error(session):
                try:
                    async with asyncio.timeout(config.episode.timeout_s):
                        termination = await _conversation(session, agent, usage, state)
                except TimeoutError:
                    termination = "timeout"
                except INFRASTRUCTURE_ERRORS as exc:
                    error = system_error_kind(exc, "tool_server")
            try:
                verdict = await session.close(final_reply=state["last_reply"], termination=termination)
            except INFRASTRUCTURE_ERRORS as exc:
                error = error or system_error_kind(exc, "grader")
            if verdict is not None and verdict.system_error:
                error = error or verdict.system_error
        scored = verdict if error is None else None  # the verdict, unless a system error voids it
        return TrialRecord(
            task_id=task.id, domain=task.domain, trial=index, passed=bool(scored.passed) if scored else None,
            system_error=None if scored else (error or "grader"), termination=termination if scored else "system_error",
            turns=state["turns"], usage=usage, model=model_name or config.endpoint.model, weight_version=None,
            seconds=round(time.perf_counter() - start, 3), diff=verdict_lines(scored) if scored else [],
            outcome=scored.outcome if scored else None, malformed_tool_calls=state["malformed"],
            reward_breakdown=scored.breakdown if scored else None)

    return trial

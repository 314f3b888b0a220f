"""The environment session: everything one episode needs, and its verdict at the end.

    session = await open_session(task)          # fresh private backend + MCP client + user simulator
    session.system_messages, session.tool_schemas, session.opening()
    result = await session.call_tool(name, args)   # or session.client.call_tool(...)
    turn = await session.user_reply(agent_text)    # records the reply for answer rubrics
    verdict = await session.close()                # grade the final state, free the backend

Sessions may be opened and closed in any order and from any task: each session's in-process MCP client lives
in its own background task (an anyio task group must be exited by the task that entered it, in LIFO order).
External suites (whose backends are separate MCP processes) implement `EnvironmentSession` too, so the
episode loop never knows which kind it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, Protocol

from mcp import Client
from mcp.types import CallToolResult, TextContent

from envs.arguments import unsendable
from envs.domain import Domain
from envs.held_open import hold_open
from envs.judges.llm import LlmJudge
from envs.mcp_server import build_server
from envs.registry import get_domain
from envs.tasks import Task, UserScenario
from envs.users.base import UserSimulator, UserTurn
from envs.users.scripted import ScriptedUser
from envs.verdict import Verdict
from envs.verifier import grade

UserFactory = Callable[[UserScenario], UserSimulator]
# "full": the written policy and every tool's documented schema (what a capable model reads).
# "compact": the domain's one-line description and today's date; the tool schemas still validate calls but are
# not rendered (envs/README.md says how much shorter), for tiny policies that learn the domain and its tools
# from demonstrations rather than by reading them (the laptop default).
PromptStyle = Literal["full", "compact"]
# How an episode ended, as the episode loop tells `close`: a suite that scores a cut episode differently (τ²-bench
# scores 0 unless the agent or the user stopped) needs it; built-in grading reads the final state either way.
Termination = Literal["agent_done", "user_done", "max_turns", "token_budget", "timeout", "system_error"]


class EnvironmentSession(Protocol):
    task: Task
    scenario: UserScenario
    system_messages: list[dict[str, str]]
    tool_schemas: list[dict[str, Any]]
    tools_in_prompt: bool  # False: the system messages already describe the tools; render no tools block

    def opening(self) -> str: ...
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult: ...
    async def user_reply(self, agent_text: str) -> UserTurn: ...
    async def close(self, final_reply: str | None = None, termination: Termination | None = None) -> Verdict: ...


def openai_tool_schemas(domain: Domain) -> list[dict[str, Any]]:
    """The domain's tools in OpenAI function-calling form (what chat templates render)."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in domain.mcp_tools.values()
    ]


def system_prompt(domain: Domain, style: PromptStyle = "full") -> str:
    if style == "full":
        return domain.system_prompt()
    return f"{domain.description} Today's date is {domain.today}."


class BuiltinSession:
    """A session on a built-in domain: private sandbox, in-process MCP client, simulated user."""

    def __init__(self, task: Task, domain: Domain, user: UserSimulator, judge: LlmJudge | None,
                 prompt: PromptStyle = "full") -> None:
        self.task = task
        self.domain = domain
        self.user = user
        self.judge = judge
        self.scenario = task.scenario  # what the user simulator knows (for an external simulator, if any)
        self.sandbox = domain.new_sandbox(task.initial_patch)
        self.server = build_server(domain, self.sandbox)
        self.client = Client(self.server)
        self.system_messages = [{"role": "system", "content": system_prompt(domain, prompt)}]
        self.tool_schemas = openai_tool_schemas(domain)
        self.tools_in_prompt = prompt == "full"
        self.agent_replies: list[str] = []
        self._stop = asyncio.Event()
        self._client_task: asyncio.Task[None] | None = None
        self._closed = False

    async def _start(self) -> BuiltinSession:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._client_task = asyncio.create_task(hold_open(self.client, ready, self._stop),
                                                name=f"mcp-client {self.task.id}")
        await ready
        return self

    async def _release(self) -> None:
        self._closed = True
        self._stop.set()
        try:
            if self._client_task is not None:
                await self._client_task
        finally:
            self.sandbox.close()

    def opening(self) -> str:
        return self.user.opening()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """The tool's result, or its refusal (`isError`); a call the client cannot encode is refused unsent."""
        if (refusal := unsendable(name, arguments)) is not None:
            return CallToolResult(content=[TextContent(type="text", text=refusal)], is_error=True)
        return await self.client.call_tool(name, arguments)

    async def user_reply(self, agent_text: str) -> UserTurn:
        self.agent_replies.append(agent_text)
        return await self.user.reply(agent_text)

    async def close(self, final_reply: str | None = None, termination: Termination | None = None) -> Verdict:
        """Grade the final state (and replies, plus `final_reply` if the agent ended on one) and free it all;
        the state is graded however the episode ended (`termination`)."""
        if self._closed:
            raise RuntimeError(f"session for {self.task.id} is already closed")
        if final_reply:
            self.agent_replies.append(final_reply)
        try:
            return await grade(self.domain, self.task, self.sandbox, self.agent_replies, self.judge)
        finally:
            await self._release()

    async def __aenter__(self) -> BuiltinSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._closed:
            await self._release()


async def open_session(task: Task, *, user: UserFactory = ScriptedUser, judge: LlmJudge | None = None,
                       prompt: PromptStyle = "full") -> BuiltinSession:
    """Open an episode of `task`: a fresh backend, its MCP client, a user made by `user(scenario)`, and the
    agent's instructions in the given `prompt` style."""
    if task.golden_hash is None:
        raise ValueError(f"task {task.id} is not sealed (no golden hash); get tasks from envs.load_tasks, "
                         "envs.read_jsonl or envs.loading.seal")
    session = BuiltinSession(task, get_domain(task.domain), user(task.scenario), judge, prompt)
    try:
        return await session._start()
    except BaseException:
        await session._release()
        raise

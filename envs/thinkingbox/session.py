"""ThinkingBox-Bench episodes behind the `envs.EnvironmentSession` interface, so `rollout.episode.run_episode`
runs them unchanged: `run_episode(task, engine, interpreter, group_id=..., opener=suite.open)`.

End of an episode (the benchmark's rule: the agent ends it by putting `<DONE>` in a reply). `user_reply`
answers `UserTurn(done=True)` without asking the simulator when the agent's reply contains `<DONE>`, and
also once the simulator has answered `max_user_sim_turns` times; the simulator itself may stop with
`###STOP###`. run_episode reports all three as termination `user_done`; `session.ended_by` says which
(`agent_done_marker`, `user_turn_cap`, `user_stop`). An agent that emits end-of-text instead is
run_episode's `agent_done`. Either way run_episode calls `close(final_reply=...)`, which grades the state and
judges the rubrics on that last reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from mcp.types import CallToolResult, TextContent

from envs.chat_endpoint import ChatClient
from envs.errors import ConfigError
from envs.judges.llm import LlmJudge
from envs.session import Termination
from envs.tasks import Task
from envs.thinkingbox.config import ThinkingBoxConfig
from envs.thinkingbox.grading import DONE_MARKER, grade
from envs.thinkingbox.loading import BenchmarkCase, load_cases
from envs.thinkingbox.preflight import check_interpreter
from envs.thinkingbox.server import RESERVED_PREFIX, ServerError, ServerProcess
from envs.thinkingbox.user import ThinkingBoxUser
from envs.users.base import UserSimulator, UserTurn
from envs.verdict import Verdict

UserFactory = Callable[[BenchmarkCase], UserSimulator]
EndedBy = Literal["agent_done_marker", "user_turn_cap", "user_stop"]


def tool_schemas(case: BenchmarkCase, server: ServerProcess) -> list[dict[str, Any]]:
    """The scenario's allow-listed tools, in its order, as OpenAI function schemas from the live server."""
    listed = {tool.name: tool for tool in server.tools if not tool.name.startswith(RESERVED_PREFIX)}
    missing = [name for name in case.scenario.tools if name not in listed]
    if missing:
        raise ServerError(f"{case.id}: scenario {case.scenario.name} allows tools its server lacks: {missing}",
                          kind="tb_server_tools")
    return [{"type": "function", "function": {"name": name, "description": listed[name].description or "",
                                              "parameters": listed[name].input_schema}}
            for name in case.scenario.tools]


def refusal(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class ThinkingBoxSession:
    def __init__(self, case: BenchmarkCase, server: ServerProcess, user: UserSimulator | None,
                 judge: LlmJudge | None) -> None:
        self.case = case
        self.task: Task = case.task
        self.scenario = self.task.scenario
        self.server = server
        self.user = user
        self.judge = judge
        self.system_messages = [{"role": "system", "content": case.agent_instructions},
                                {"role": "system", "content": case.scenario.bot_instructions}]
        self.tool_schemas = tool_schemas(case, server)
        self.tools_in_prompt = True
        self._allowed = {schema["function"]["name"] for schema in self.tool_schemas}
        self.last_reply: str | None = None
        self.user_turns = 0
        self.ended_by: EndedBy | None = None
        self._closed = False

    def opening(self) -> str:
        return self.case.query

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """A tool outside the allow-list (the reserved ones included) is refused to the agent, not run."""
        if name not in self._allowed:
            return refusal(f"unknown tool {name!r}; available tools: {', '.join(sorted(self._allowed))}")
        return await self.server.call(name, arguments)

    async def user_reply(self, agent_text: str) -> UserTurn:
        self.last_reply = agent_text
        if DONE_MARKER in agent_text:
            self.ended_by = "agent_done_marker"
            return UserTurn("", done=True)
        if self.user_turns >= self.case.max_user_turns:
            self.ended_by = "user_turn_cap"
            return UserTurn("", done=True)
        if self.user is None:
            raise ConfigError(f"{self.case.id}: no user simulator configured (ThinkingBoxConfig.user: an "
                              "OpenAI-compatible endpoint)")
        self.user_turns += 1
        turn = await self.user.reply(agent_text)
        if turn.done:
            self.ended_by = "user_stop"
        return turn

    async def close(self, final_reply: str | None = None, termination: Termination | None = None) -> Verdict:
        """Grade (state hash, then rubrics on the last reply) and stop the server process; the benchmark grades
        the state however the episode ended (`termination`)."""
        if self._closed:
            raise RuntimeError(f"session for {self.case.id} is already closed")
        self._closed = True
        if final_reply is not None:
            self.last_reply = final_reply
        try:
            effects = await self.server.effects()
            return await grade(self.case.id, effects, self.case.rubrics, self.last_reply, self.judge)
        finally:
            await self.server.teardown()
            await self.server.close()

    async def abort(self) -> None:
        """Stop the server without grading (a caller that gives up on the episode)."""
        if not self._closed:
            self._closed = True
            await self.server.close()


class ThinkingBoxSuite:
    """The loaded benchmark: its `tasks` (envs.Task, ids prefixed `thinkingbox/`) and `open`, the opener."""

    def __init__(self, config: ThinkingBoxConfig, cases: list[BenchmarkCase], *, user: UserFactory | None = None,
                 judge: LlmJudge | None = None) -> None:
        self.config = config
        self.cases = {case.id: case for case in cases}
        self.tasks = [case.task for case in cases]
        self.user = user
        self.judge = judge
        self._clients: list[ChatClient] = []  # endpoints this suite built (closed by `aclose`)
        self._starts: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    @classmethod
    def load(cls, config: ThinkingBoxConfig, limit: int | None = None, *, user: UserFactory | None = None,
             judge: LlmJudge | None = None, preflight: bool = True) -> ThinkingBoxSuite:
        """Check the servers' interpreter (`preflight`), read the test list, and build the user and judge from
        `config` (explicit `user` / `judge` take precedence, e.g. for tests or a scripted user)."""
        if preflight:
            check_interpreter(config.python, config.data)
        clients: list[ChatClient] = []
        if user is None and config.user is not None:
            clients.append(user_client := ChatClient.from_config(config.user))

            def simulated_user(case: BenchmarkCase) -> UserSimulator:
                return ThinkingBoxUser(case.query, case.user_context, user_client, config.user_temperature)

            user = simulated_user
        if judge is None and config.judge is not None:
            clients.append(judge_client := ChatClient.from_config(config.judge))
            judge = LlmJudge(judge_client)
        suite = cls(config, load_cases(config, limit), user=user, judge=judge)
        suite._clients = clients
        return suite

    async def aclose(self) -> None:
        """Close the HTTP clients of the user and judge endpoints built by `load`."""
        for client in self._clients:
            await client.aclose()

    def case(self, task_id: str) -> BenchmarkCase:
        if task_id not in self.cases:
            raise KeyError(f"{task_id} is not a task of this ThinkingBox suite")
        return self.cases[task_id]

    def _start_slots(self) -> asyncio.Semaphore:
        """Bounds concurrent server starts; one semaphore per event loop (tests run several loops)."""
        loop = asyncio.get_running_loop()
        if self._starts is None or self._starts[0] is not loop:
            self._starts = (loop, asyncio.Semaphore(self.config.max_concurrent_starts))
        return self._starts[1]

    async def open(self, task: Task) -> ThinkingBoxSession:
        """A fresh server process for `task`, initialised with its merged config (the `opener` of run_episode)."""
        case = self.case(task.id)
        server = ServerProcess(self.config.python, case.command, data_root=self.config.data,
                               start_timeout_s=self.config.start_timeout_s, call_timeout_s=self.config.call_timeout_s,
                               label=f"{case.server} for {case.id}")
        try:
            async with self._start_slots():
                await server.start()
                await server.init(case.config)
            return ThinkingBoxSession(case, server, self.user(case) if self.user else None, self.judge)
        except BaseException:
            await server.close()
            raise

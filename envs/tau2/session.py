"""τ²-bench episodes behind `envs.EnvironmentSession`, so the episode loop, selection and evaluation run them
as they run a built-in domain: `run_episode(task, engine, interpreter, group_id=..., opener=suite.open)`.

The opening follows τ²'s protocol: the agent's system prompt is τ²'s (its agent instruction and the domain
policy) with τ²'s tool schemas; the conversation opens with τ²'s greeting from the agent, and the user's
first message is the simulated user's answer to it (asked when the session opens). The worker keeps τ²'s
message record and grades it (envs/tau2/worker.py); `close` hands it the way the episode ended, because τ²
scores 0 unless the agent or the user stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mcp.types import CallToolResult, TextContent

from envs.chat_endpoint import ChatClient
from envs.errors import ConfigError
from envs.session import Termination
from envs.tasks import Task
from envs.tau2.config import Tau2Config
from envs.tau2.tasks import SuiteSplit, Tau2Case, list_cases
from envs.tau2.user import Tau2User
from envs.tau2.worker_client import WorkerPool, WorkerProcess
from envs.users.base import UserTurn
from envs.verdict import RubricResult, Verdict

log = logging.getLogger(__name__)

# how the episode loop's endings read in τ²'s vocabulary (only the first two are scored)
TAU2_ENDINGS: dict[str, str] = {"agent_done": "agent_stop", "user_done": "user_stop", "max_turns": "max_steps",
                                "token_budget": "agent_error", "timeout": "agent_error"}


class VerdictDisagreement(RuntimeError):
    """grading "both": the fast verdict and τ²'s evaluator disagree on a trajectory (a bug to fix)."""


class Tau2Session:
    def __init__(self, case: Tau2Case, worker: WorkerProcess, opened: dict[str, Any], config: Tau2Config,
                 user: Tau2User | None) -> None:
        self.case, self.task, self.config = case, case.task, config
        self.scenario = self.task.scenario
        self.worker, self.session_id = worker, opened["session"]
        self.system_messages = [{"role": "system", "content": opened["system_prompt"]},
                                {"role": "assistant", "content": opened["greeting"]}]
        self.tool_schemas: list[dict[str, Any]] = opened["tools"]
        self.tools_in_prompt = True
        self.user = user
        self.first_message = ""
        self._closed = False

    async def start(self, greeting: str) -> None:
        """The user's first message, answering τ²'s greeting."""
        turn = await self._user().respond(greeting, trusted=True)
        await self.say("user", turn.text)
        self.first_message = turn.text

    def _user(self) -> Tau2User:
        if self.user is None:
            raise ConfigError(f"{self.task.id}: no user simulator configured (tau2.user: an OpenAI-compatible "
                              "endpoint)")
        return self.user

    def opening(self) -> str:
        return self.first_message

    async def say(self, role: str, content: str) -> None:
        await self.worker.request("say", session=self.session_id, role=role, content=content)

    async def run_tool(self, requestor: str, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        answer = await self.worker.request("call", session=self.session_id, requestor=requestor, name=name,
                                           arguments=arguments)
        return str(answer["content"]), bool(answer["error"])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """τ²'s answer to the agent's call; an unknown tool or bad arguments come back as τ²'s error text."""
        content, error = await self.run_tool("assistant", name, arguments)
        return CallToolResult(content=[TextContent(type="text", text=content)], is_error=error)

    async def user_reply(self, agent_text: str) -> UserTurn:
        await self.say("assistant", agent_text)
        turn = await self._user().respond(agent_text)
        await self.say("user", turn.text)
        return turn

    async def close(self, final_reply: str | None = None, termination: Termination | None = None) -> Verdict:
        """Grade τ²'s record of the episode (`config.grading`) and free the worker's session. The agent's
        closing words (`final_reply` of an episode it ended) are part of the record."""
        if self._closed:
            raise RuntimeError(f"session for {self.task.id} is already closed")
        self._closed = True
        try:
            if termination is None or termination == "system_error":
                return Verdict(task_id=self.task.id, passed=False, system_error="not graded: the episode failed")
            if termination == "agent_done" and final_reply:
                await self.say("assistant", final_reply)
            graded = await self.worker.request("grade", session=self.session_id, how=self.config.grading,
                                               termination=TAU2_ENDINGS[termination],
                                               max_errors=self.config.max_errors)
            return self._verdict(graded)
        finally:
            await self._release()

    async def abort(self) -> None:
        """Free the worker's session without grading (a caller that gives up on the episode)."""
        if not self._closed:
            self._closed = True
            await self._release()

    async def _release(self) -> None:
        self.worker.sessions -= 1
        if self.worker.alive:
            await self.worker.request("close", session=self.session_id)

    def _verdict(self, graded: dict[str, Any]) -> Verdict:
        tau2, fast = graded.get("tau2"), graded.get("fast")
        if tau2 is not None and "replay_error" in tau2:
            log.warning("%s: tau2's replay diverged from the recorded tool results: %s", self.task.id,
                        tau2["replay_error"])
            return Verdict(task_id=self.task.id, passed=False, system_error="tau2_replay")
        if tau2 is not None and fast is not None and tau2["reward"] != fast["reward"]:
            raise VerdictDisagreement(f"{self.task.id}: fast verdict {fast} but tau2's evaluator {tau2}")
        chosen = tau2 if tau2 is not None else fast
        assert chosen is not None, "the worker grades at least one way"
        breakdown = {str(kind): float(value) for kind, value in chosen["breakdown"].items()}
        rubrics = [RubricResult(kind=f"tau2_{kind.lower()}", passed=value == 1.0, description=f"τ² {kind} check")
                   for kind, value in breakdown.items()]
        if "note" in chosen:
            rubrics.append(RubricResult(kind="tau2_ending", passed=chosen["reward"] == 1.0, detail=chosen["note"]))
        return Verdict(task_id=self.task.id, passed=chosen["reward"] == 1.0, rubrics=rubrics, breakdown=breakdown)


class Tau2Suite:
    """τ²-bench's tasks of one split (`tasks`, envs.Task records) and `open`, the opener. Used inside one event
    loop; `aclose` ends its workers and the user endpoint's client."""

    def __init__(self, config: Tau2Config, cases: Sequence[Tau2Case], *, user: ChatClient | None = None) -> None:
        self.config = config
        self.cases = {case.id: case for case in cases}
        self.tasks: list[Task] = [case.task for case in cases]
        self._user = user
        self._pool = WorkerPool(config)

    @classmethod
    def load(cls, config: Tau2Config, split: SuiteSplit, domains: tuple[str, ...] | None = None,
             limit: int | None = None) -> Tau2Suite:
        """The split's cases (the first `limit`) and the user endpoint's client from `config.user`."""
        cases = list_cases(config, split, domains)[:limit]
        return cls(config, cases, user=ChatClient.from_config(config.user) if config.user else None)

    def case(self, task_id: str) -> Tau2Case:
        if task_id not in self.cases:
            raise KeyError(f"{task_id} is not a task of this tau2 suite")
        return self.cases[task_id]

    async def open(self, task: Task) -> Tau2Session:
        """A fresh τ² environment for `task` on the least busy worker, and the user's first message."""
        case = self.case(task.id)
        worker = await self._pool.worker()
        opened = await worker.request("open", domain=case.domain, task_id=case.tau2_id)
        worker.sessions += 1
        session = Tau2Session(case, worker, opened, self.config, None)
        if self._user is not None:
            session.user = Tau2User(self._user, opened["user_system_prompt"], opened["user_tools"],
                                    lambda name, arguments: session.run_tool("user", name, arguments),
                                    self.config.user_temperature, self.config.max_user_tool_calls)
        try:
            await session.start(opened["greeting"])
        except BaseException:
            await session.abort()
            raise
        return session

    async def aclose(self) -> None:
        await self._pool.close()
        if self._user is not None:
            await self._user.aclose()

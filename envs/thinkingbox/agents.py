"""Two reference agents that check the adapter, not a model: the oracle replays the golden interactions
through the session (must reach the golden state on every task), the do-nothing agent closes at once (must
pass only tasks whose golden state is the initial state)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from envs.errors import EnvSystemError
from envs.thinkingbox.session import ThinkingBoxSuite
from envs.verdict import Verdict

AgentName = Literal["oracle", "nothing"]


@dataclass(frozen=True)
class Attempt:
    task_id: str
    domain: str
    agent: AgentName
    verdict: Verdict | None  # None when a system error stopped the attempt before grading
    system_error: str | None
    seconds: dict[str, float]  # open (start + init), tools, close (effects + teardown + stop), total
    tool_errors: int = 0  # golden calls the server answered with an error result

    @property
    def state_matches(self) -> bool:
        return bool(self.verdict and self.verdict.state_matches)


async def attempt(suite: ThinkingBoxSuite, task_id: str, agent: AgentName) -> Attempt:
    case = suite.case(task_id)
    seconds: dict[str, float] = {}
    tool_errors = 0
    start = time.perf_counter()
    try:
        session = await suite.open(case.task)
        seconds["open"] = time.perf_counter() - start
        try:
            mark = time.perf_counter()
            if agent == "oracle":
                for call in case.golden:
                    result = await session.call_tool(call.tool, dict(call.args))
                    text = "".join(getattr(block, "text", "") for block in result.content)
                    tool_errors += bool(result.is_error) or text.lstrip().startswith('{"error"')
            seconds["tools"] = time.perf_counter() - mark
        except BaseException:
            await session.abort()
            raise
        mark = time.perf_counter()
        verdict = await session.close()
        seconds["close"] = time.perf_counter() - mark
    except EnvSystemError as error:
        seconds["total"] = time.perf_counter() - start
        return Attempt(task_id, case.domain, agent, None, f"{error.kind}: {error}", seconds, tool_errors)
    seconds["total"] = time.perf_counter() - start
    return Attempt(task_id, case.domain, agent, verdict, verdict.system_error, seconds, tool_errors)

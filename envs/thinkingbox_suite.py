"""ThinkingBox-Bench v1 (envs.thinkingbox) as a suite (envs.suite_protocol): evaluation-only (every task id is a
benchmark id, never selected from or trained on), its settings are `ThinkingBoxConfig`, and each session is a server
process of its own, graded by the benchmark's checks and rubric judge."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from envs.http_retry import RetryPolicy
from envs.session import PromptStyle, UserFactory
from envs.suite_protocol import Opener
from envs.tasks import Task
from envs.thinkingbox import ThinkingBoxConfig, ThinkingBoxSuite, is_benchmark_task, load_cases
from envs.users.scripted import ScriptedUser


class ThinkingBoxBench:
    name = "thinkingbox"
    title = "ThinkingBox-Bench"
    settings_type = ThinkingBoxConfig
    requirements = {"data": "a local clone of microsoft/thinkingbox-data",
                    "python": "the servers' Python 3.12 interpreter"}
    trainable = False  # its README forbids training on the tasks
    splits: tuple[str, ...] = ()  # none: its test list is evaluated whole
    heldout_split = "test"  # every task: what the test list holds
    evaluation_settings: dict[str, Any] = {}
    outcome_verdicts = False

    @property
    def is_benchmark_task(self) -> Callable[[str], bool]:
        return is_benchmark_task

    def tasks(self, settings: ThinkingBoxConfig, split: str | None) -> list[Task]:
        return [case.task for case in load_cases(settings)]

    @contextlib.asynccontextmanager
    async def sessions(self, settings: ThinkingBoxConfig, split: str | None, *, user: UserFactory = ScriptedUser,
                       prompt: PromptStyle = "full") -> AsyncIterator[Opener]:
        suite = ThinkingBoxSuite.load(settings)
        try:
            yield suite.open
        finally:
            await suite.aclose()

    def placement(self, settings: ThinkingBoxConfig) -> dict[str, Any]:
        """The servers' interpreter, their time limits and starts, and how the endpoints' requests are timed out and
        retried."""
        retried = set(RetryPolicy.model_fields)
        return {"python": True, "start_timeout_s": True, "call_timeout_s": True, "max_concurrent_starts": True,
                "user": retried, "judge": retried}

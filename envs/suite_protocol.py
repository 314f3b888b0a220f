"""The protocol every task suite answers (the built-in domains, τ²-bench, ThinkingBox-Bench), so that the trainer and
the commands ask a suite what they need instead of telling suites apart by name (envs.suite_registry maps a name to
its suite).

A suite lists its tasks by split, opens their sessions (inside the event loop that runs the episodes, where it may own
worker processes until the context ends), grades them its own way, may claim task ids as benchmark ids
(evaluation-only: never selected from or trained on), and may have settings of its own: a pydantic model, which is the
config section named after the suite (tbjax) and the `--<name>-*` flags of rollout.evaluate and rollout.select. The
built-in domains have none: a tasks file, domains, templates, the prompt style and the simulated user choose their
tasks and play their sessions, the same settings every built-in task reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from pydantic import BaseModel

from envs.session import EnvironmentSession, PromptStyle, UserFactory
from envs.tasks import Task
from envs.users.scripted import ScriptedUser

Opener = Callable[[Task], Awaitable[EnvironmentSession]]  # opens one episode's session (rollout's SessionOpener)


class Suite(Protocol):
    @property
    def name(self) -> str:
        """What configs and commands call it (tasks.suite, --suite), and its settings' config section."""
        ...

    @property
    def title(self) -> str:
        """What messages call it, e.g. "τ²-bench"."""
        ...

    @property
    def settings_type(self) -> type[BaseModel] | None:
        """Its own settings; None: the built-in kind, whose tasks the tasks settings choose and whose sessions the
        prompt style and user settings play (a suite with settings brings its own tasks, prompt and user)."""
        ...

    @property
    def requirements(self) -> Mapping[str, str]:
        """Its settings that running episodes needs although the type lets them be unset, each with what it is."""
        ...

    @property
    def trainable(self) -> bool:
        """Whether its train split may be selected from and trained on (False: evaluation only)."""
        ...

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits it lists tasks by (as --split names them); the first is the one trained on. None: its tasks are
        one list, evaluated whole."""
        ...

    @property
    def heldout_split(self) -> str:
        """The split evaluation holds out, which nothing trains on."""
        ...

    @property
    def evaluation_settings(self) -> Mapping[str, Any]:
        """How its evaluation grades, as settings that replace the configured ones (τ²: its own evaluator, where
        training reads the live environment's reward)."""
        ...

    @property
    def outcome_verdicts(self) -> bool:
        """Whether its verdicts name the outcome (golden, careless, unchanged) a task kind's decision is read from."""
        ...

    @property
    def is_benchmark_task(self) -> Callable[[str], bool] | None:
        """Whether a task id is one of its benchmark ids (evaluation-only); None: it claims none."""
        ...

    def tasks(self, settings: Any, split: str | None) -> list[Task]:
        """Its tasks of `split` (None: of every split) as `settings` configure it."""
        ...

    def sessions(self, settings: Any, split: str | None, *, user: UserFactory = ScriptedUser,
                 prompt: PromptStyle = "full") -> AbstractAsyncContextManager[Opener]:
        """The opener of its tasks of `split` (None: every split), for episodes of the running event loop; what it
        starts ends with the context. `user` and `prompt` play the built-in kind's sessions (a suite with settings
        plays its own)."""
        ...

    def placement(self, settings: Any) -> dict[str, Any]:
        """Of `settings`, what says where and how it runs rather than what a run computes, and the settings at their
        defaults that runs before them never had: a pydantic exclude spec, which a run's fingerprint leaves out."""
        ...

"""Helpers shared by the envs tests."""

from __future__ import annotations

from envs.tasks import Task


def first_task(tasks: list[Task], template: str) -> Task:
    """The first of `tasks` made by `template`."""
    return next(t for t in tasks if t.template == template)

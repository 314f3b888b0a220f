"""A domain of one's own, outside this repository: a tiny package written into a temporary directory and put
on sys.path, optionally installed (a dist-info directory declaring an entry point of `tbjax.domains`, what
`pip install` of a package with that entry point leaves behind).

The package `tiny_shop` is the starter domain `python -m envs.new_domain` writes: one table, one tool and two
templates (train and heldout split). Tests use it through the real registry, loading, sessions and episode
loop; `external_domain` undoes everything after the test (sys.path, the imported module, the registry's view
of installed and referenced domains).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from envs import Task, Verdict, open_session, registry
from envs.new_domain import starter_source
from envs.session import EnvironmentSession

PACKAGE = "tiny_shop"
REFERENCE = f"{PACKAGE}:DOMAIN"
NAME = "tiny_shop"  # the Domain's name: what its tasks record and their ids start with

# the domain `python -m envs.new_domain` starts users with, and another under a built-in domain's name
SOURCE = starter_source(NAME) + '''
import dataclasses

CLASH = dataclasses.replace(DOMAIN, name="library")
'''


def forget_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry as a fresh process sees it: no domain loaded by reference yet."""
    monkeypatch.setattr(registry, "_referenced", {})


@contextmanager
def external_domain(root: Path, monkeypatch: pytest.MonkeyPatch, *,
                    entry_points: tuple[str, ...] = ()) -> Iterator[Path]:
    """`tiny_shop` importable from `root`; `entry_points` ("name = module:attr" lines) installs it as the
    distribution tiny-shop declaring them in the group tbjax.domains. Undone on exit (the module, the registry's
    entry points) and at the test's teardown (sys.path, the domains loaded by reference: `monkeypatch`)."""
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text(SOURCE)
    if entry_points:
        dist_info = root / "tiny_shop-0.1.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-shop\nVersion: 0.1\n")
        (dist_info / "entry_points.txt").write_text("\n".join([f"[{registry.ENTRY_POINT_GROUP}]", *entry_points, ""]))
    monkeypatch.syspath_prepend(str(root))
    forget_references(monkeypatch)
    registry._installed.cache_clear()
    try:
        yield root
    finally:
        sys.modules.pop(PACKAGE, None)
        registry._installed.cache_clear()  # sys.path is restored after this, so the next lookup reads it anew


async def golden_verdict(task: Task,
                         opener: Callable[[Task], Awaitable[EnvironmentSession]] = open_session) -> Verdict:
    """The verdict on an agent that makes the task's golden calls through the session's MCP client and then
    gives its reference answer: a real session of the task's domain, found by the task's domain name."""
    session = await opener(task)
    for step in task.golden_path:
        result = await session.call_tool(step.tool, dict(step.args))
        assert not result.is_error, result.content
    return await session.close(task.reference_answer)

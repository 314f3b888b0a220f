"""Golden replays: the expected final state of a task is whatever its golden path produces."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from envs.domain import Domain
from envs.errors import InvalidTaskError
from envs.sandbox import Sandbox
from envs.tasks import Task


def replay(domain: Domain, task: Task) -> Sandbox:
    """A fresh sandbox with the task's patch applied and its golden path executed.

    Any failing call makes the task invalid; the error names the task, the step and the call.
    """
    sandbox = initial_sandbox(domain, task)
    run_golden_path(domain, task, sandbox)
    return sandbox


def initial_sandbox(domain: Domain, task: Task) -> Sandbox:
    """A fresh sandbox in the task's initial state (template + patch)."""
    try:
        return domain.new_sandbox(task.initial_patch)
    except Exception as exc:
        raise InvalidTaskError(task.id, f"initial_patch does not apply: {exc}") from exc


def run_golden_path(domain: Domain, task: Task, sandbox: Sandbox) -> list[Any]:
    """Execute the golden path on `sandbox` and return each call's result; the first failing call closes the
    sandbox and invalidates the task."""
    results = []
    for step, call in enumerate(task.golden_path, start=1):
        try:
            results.append(domain.invoke(sandbox, call.tool, call.args))
        except (ToolError, ValueError, TypeError, LookupError) as exc:
            sandbox.close()
            raise InvalidTaskError(
                task.id, f"golden step {step} {call.tool}({call.args}) failed to replay: {exc}"
            ) from exc
    return results


def golden_results(domain: Domain, task: Task) -> list[Any]:
    """What each golden call returns, replayed on a fresh sandbox that is closed afterwards."""
    sandbox = initial_sandbox(domain, task)
    try:
        return run_golden_path(domain, task, sandbox)
    finally:
        sandbox.close()

"""Typed failures of the environment, split by who is to blame.

`EnvSystemError` and its subclasses mean the *infrastructure* failed (an endpoint timed out, a judge said
something unparseable, a sandbox could not be built). The trainer must never score these as the agent's
failure: it refills the group instead. Each carries a short machine-readable `kind` for metrics.

`ConfigError` is the operator's mistake (a rubric that needs a judge and none configured, an API-key
variable that is not set): it is *not* an `EnvSystemError`, so it stops the run with its traceback instead of
voiding every episode it touches.

`InvalidTaskError` is an authoring bug in a domain (a golden path that does not replay, a duplicate task):
it is raised at load time so a broken task never reaches training.
"""

from __future__ import annotations


class EnvSystemError(Exception):
    """Infrastructure failure: never the agent's fault, never a reward of 0."""

    kind: str = "system"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class EndpointError(EnvSystemError):
    """An OpenAI-compatible endpoint (user simulator or judge) failed after all retries (envs.http_retry),
    refused the request (kind "endpoint_rejected") or answered out of protocol ("endpoint_protocol")."""

    kind = "endpoint"


class EndpointTimeout(EndpointError):
    """The endpoint did not answer within the configured timeout, on every attempt."""

    kind = "endpoint_timeout"


class JudgeParseError(EnvSystemError):
    """The LLM judge answered something that is neither yes nor no."""

    kind = "judge_unparseable"


class ConfigError(Exception):
    """Configuration the environment cannot run with (e.g. an API-key variable that is not set). Not a
    system error: every episode would fail the same way, so voiding them would only hide the mistake."""


class MissingInputError(ConfigError):
    """A file the settings name is not on this machine (a τ² venv of a cluster's run planned on a laptop): the
    trainer's dry run warns where a run stops."""


class InvalidTaskError(ValueError):
    """A task that cannot be graded (its golden path fails to replay, it duplicates another, ...)."""

    def __init__(self, task_id: str, problem: str) -> None:
        super().__init__(f"invalid task {task_id}: {problem}")
        self.task_id = task_id
        self.problem = problem

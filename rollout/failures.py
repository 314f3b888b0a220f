"""Which failures of an episode are system errors, in one place for every caller (the episode loop, the
chat-level evaluation episode, the group scheduler).

A system error means the infrastructure failed, not the agent: the episode is voided (never scored; training
re-runs its group, evaluation reports it beside the scores). Only failures a retry or another server could
fix qualify:

- `envs.EnvSystemError`: user simulator or judge endpoints failing or timing out after their retries
  (`EndpointError`, `EndpointTimeout`), a judge answering neither yes nor no (`JudgeParseError`), a tool
  server that would not start, died or hung (ThinkingBox `ServerError`), the agent's API failing
  (`AgentEndpointError`);
- `rollout.engines.protocol.EngineError`: an engine's dead or failing server, exhausted retries, a protocol violation;
- `httpx.TransportError`: a connection failure or timeout from a client that did not wrap it;
- `ConnectionError`, `TimeoutError`: a refused, reset or broken connection, a deadline inside one call (the
  episode's own deadline is a termination, handled by the loop before it gets here).

Everything else an episode raises is a bug or a bad configuration (`envs.errors.ConfigError`,
`NotImplementedError`, `RecursionError`, `TypeError`, `KeyError`, a `ValueError`, ...). Those fail every
episode alike, so voiding them would hide them as flaky infrastructure and silently drop exactly the
episodes that hit them from the scores: they propagate and stop the run with their traceback, after the
episode's session is closed (`closes_on_error`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx

from envs import EnvironmentSession, EnvSystemError
from rollout.engines.protocol import EngineError

INFRASTRUCTURE_ERRORS: tuple[type[Exception], ...] = (
    EnvSystemError, EngineError, httpx.TransportError, ConnectionError, TimeoutError)


def system_error_kind(error: Exception, default: str) -> str:
    """The kind recorded for an infrastructure `error`: its own `kind` when it carries one (EnvSystemError,
    EngineError), else `default`, the phase it failed in (e.g. "tool_server")."""
    return str(getattr(error, "kind", default))


@contextlib.asynccontextmanager
async def closes_on_error(session: EnvironmentSession) -> AsyncIterator[None]:
    """Closes `session` when the body raises (a bug, or the episode being cancelled because another one
    hit a bug), then lets the exception go on: the run stops without leaking the session's sandbox, MCP
    client or tool server. What closing itself raises is dropped, so the original failure is the one
    reported."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            await session.close()
        raise

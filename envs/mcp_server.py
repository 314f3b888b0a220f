"""A domain's tools as an MCP server: bound to one sandbox, or one sandbox per MCP session.

`build_server(domain, sandbox)` serves one sandbox to whoever connects: an in-process episode (`envs.session`,
the client is the episode's own) and `python -m envs.serve` over stdio (one process, one client).

`build_session_server(domain, new_sandbox)` is for a server many clients reach at once (streamable HTTP): every
MCP session gets its own sandbox from `new_sandbox()` on its first tool call, keeps it across its requests and
closes it when the session ends (the client's DELETE, the idle timeout, a crash or server shutdown). What one
session writes, and whom it has verified, no other session can see. The state lives on the SDK's per-session
`Connection` (its `state`, torn down by its `exit_stack`), so no session table is kept here.

A session is the handshake era's: the 2026-07-28 protocol has no sessions (every request is a connection of its
own), so a stateful backend cannot honour it. Such requests, the `server/discover` probe included, are refused
with UNSUPPORTED_PROTOCOL_VERSION naming the handshake versions; the SDK's `Client` in its default "auto" mode
then falls back to the initialize handshake and gets a session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import UNSUPPORTED_PROTOCOL_VERSION, UnsupportedProtocolVersionErrorData
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from envs.domain import Domain, DomainTool
from envs.sandbox import Sandbox

SandboxFactory = Callable[[], Sandbox]

_CONTEXT_KWARG = "_mcp_context"  # the request context's keyword; no tool parameter starts with an underscore
_STATE_KEY = "envs.session_tools"  # this session's tools, bound to its sandbox, in `Connection.state`


def build_server(domain: Domain, sandbox: Sandbox) -> MCPServer:
    """An `MCPServer` whose tools read and write `sandbox` only (tool schemas are built once per domain)."""
    return _server(domain, domain.bind_tools(sandbox))


def build_session_server(domain: Domain, new_sandbox: SandboxFactory) -> MCPServer:
    """An `MCPServer` that gives every MCP session a sandbox of its own, made by `new_sandbox()`.

    The tools keep the domain's schemas; each call is forwarded to the calling session's copy of the tool, bound
    to that session's sandbox. Requests outside a session (the 2026-07-28 era) are refused (module docstring).
    """
    tools = [
        definition.model_copy(update={"fn": _session_body(domain, new_sandbox, name), "context_kwarg": _CONTEXT_KWARG})
        for name, definition in domain.mcp_tools.items()
    ]
    return _server(domain, tools, middleware=[_sessions_only])


def _server(domain: Domain, tools: Sequence[DomainTool], middleware: Sequence[ServerMiddleware[Any]] = ()) -> MCPServer:
    return MCPServer(
        name=f"tbjax-{domain.name}",
        instructions=domain.system_prompt(),
        tools=list(tools),
        middleware=middleware,
        log_level="WARNING",  # tool refusals are the agent's business, not log noise at thousands of episodes
    )


def _session_body(domain: Domain, new_sandbox: SandboxFactory, name: str) -> Callable[..., Any]:
    """Tool `name`'s body on the session server: the SDK passes the request's context, which names the session."""

    async def body(**kwargs: Any) -> Any:
        context: Context = kwargs.pop(_CONTEXT_KWARG)
        return await _session_tools(context, domain, new_sandbox)[name].fn(**kwargs)

    return body


def _session_tools(context: Context, domain: Domain, new_sandbox: SandboxFactory) -> dict[str, DomainTool]:
    """The calling session's tools, bound to its sandbox; made on its first call, closed when the session ends.

    No await between the lookup and the store, so two concurrent first calls of one session cannot both build.
    """
    connection = _connection(context)
    tools: dict[str, DomainTool] | None = connection.state.get(_STATE_KEY)
    if tools is None:
        sandbox = new_sandbox()
        connection.exit_stack.callback(sandbox.close)
        tools = connection.state[_STATE_KEY] = {tool.name: tool for tool in domain.bind_tools(sandbox)}
    return tools


def _connection(context: Context) -> Connection:
    """The SDK's per-session `Connection` of the request `context` belongs to.

    mcp 2.3 hands tools an `mcpserver.Context`, which does not expose the connection yet (the runner's
    `TODO(L54)` Context rework will: `mcp.server.context.Context.connection`); its request's `ServerSession`
    holds it. Should an SDK upgrade move it, every tool call fails loudly (a crash, logged with its traceback)
    rather than silently sharing state.
    """
    connection = getattr(context.request_context.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError("the MCP SDK no longer exposes the request's Connection; update envs.mcp_server")
    return connection


async def _sessions_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: refuse a 2026-07-28 request, which belongs to no session (module docstring)."""
    if ctx.request_id is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        supported = list(HANDSHAKE_PROTOCOL_VERSIONS)
        raise MCPError(
            code=UNSUPPORTED_PROTOCOL_VERSION,
            message=f"this server keeps per-session state; connect with the initialize handshake ({supported[-1]})",
            data=UnsupportedProtocolVersionErrorData(supported=supported, requested=ctx.protocol_version).model_dump(
                mode="json"
            ),
        )
    return await call_next(ctx)

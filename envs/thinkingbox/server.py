"""One ThinkingBox domain server: a separate MCP stdio process (its own Python 3.12 venv), one per attempt.

Protocol: `__reserved__init` with the merged config, then the agent's tools, then `__reserved__geteffects`
(result and golden hashes, diff, rubrics) and `__reserved__teardown`. Every infrastructure failure (the
process does not start, dies, hangs, or a reserved call reports an error) is a `ServerError`, an
`EnvSystemError`: the episode is voided, never scored as the agent's failure. The server's stderr goes to a
temporary file whose tail is quoted in those errors.

The MCP client lives in a background task, as in `envs.session`: an anyio task group must be exited by the
task that entered it, and sessions are opened and closed from different tasks.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, Tool

from envs.errors import EnvSystemError
from envs.held_open import hold_open
from envs.thinkingbox.loading import ServerCommand

INIT, EFFECTS, TEARDOWN = "__reserved__init", "__reserved__geteffects", "__reserved__teardown"
RESERVED_PREFIX = "__reserved__"


class ServerError(EnvSystemError):
    """A domain server failed (kinds: tb_server_start, tb_server_crash, tb_server_timeout, tb_server_reserved)."""

    kind = "tb_server"


class ServerProcess:
    def __init__(self, python: str, command: ServerCommand, *, data_root: Path, start_timeout_s: float,
                 call_timeout_s: float, label: str) -> None:
        self.label = label
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", prefix="tb-server-")
        env = {"THINKINGBOX_DATA": str(data_root), **command.env}
        self._params = StdioServerParameters(command=python, args=["-m", command.module], env=env)
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.tools: list[Tool] = []
        self._failure: ServerError | None = None  # after a timeout or crash the backend's state is unknown

    def stderr_tail(self, chars: int = 1500) -> str:
        try:
            self._log.flush()
            self._log.seek(0)
            return self._log.read()[-chars:]
        except (OSError, ValueError):
            return "(stderr unavailable)"

    def _error(self, kind: str, problem: str) -> ServerError:
        return ServerError(f"{self.label}: {problem}\n--- server stderr (tail) ---\n{self.stderr_tail()}", kind=kind)

    async def start(self) -> list[Tool]:
        """Start the process, do the MCP handshake and list its tools."""
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"tb-server {self.label}")
        try:
            async with asyncio.timeout(self.start_timeout_s):
                self._client = client = await asyncio.shield(ready)
                self.tools = (await client.list_tools()).tools
        except TimeoutError as exc:
            await self.close()
            raise self._error("tb_server_timeout", f"did not start within {self.start_timeout_s}s") from exc
        except (OSError, ValueError) as exc:
            await self.close()
            raise self._error("tb_server_start", f"could not start {self._params.command} -m "
                                                 f"{self._params.args[-1]}: {exc!r}") from exc
        except Exception as exc:  # the handshake failed: the process died or spoke no MCP
            await self.close()
            raise self._error("tb_server_start", f"MCP handshake failed: {exc!r}") from exc
        return self.tools

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        """The connection's task; a crash after the handshake ends it quietly (the next call reports it)."""
        try:
            await hold_open(Client(stdio_client(self._params, errlog=self._log), mode="legacy"), ready, self._stop)
        except Exception:
            pass
        finally:
            self._client = None

    async def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """One tool call; a dead or hung server is a `ServerError`, a tool's own refusal is a normal result.

        After one such failure every later call fails too: a call that timed out may still change the backend,
        so nothing read from it afterwards (effects included) can be trusted.
        """
        if self._failure is not None:
            raise ServerError(f"{self.label}: {name} not sent; the server failed earlier: "
                              f"{str(self._failure).splitlines()[0]}", kind=self._failure.kind)
        if self._client is None:
            raise self._error("tb_server_crash", f"no live connection for {name}")
        try:
            async with asyncio.timeout(self.call_timeout_s):
                return await self._client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == INVALID_PARAMS:  # the call itself was malformed: the agent's to read, not a crash
                return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)
            self._failure = self._error("tb_server_crash", f"{name} failed: {exc!r}")
            raise self._failure from exc
        except TimeoutError as exc:  # must not escape: the episode loop reads TimeoutError as its own timeout
            self._failure = self._error("tb_server_timeout", f"{name} did not answer within {self.call_timeout_s}s")
            raise self._failure from exc
        except Exception as exc:
            self._failure = self._error("tb_server_crash", f"{name} failed: {exc!r}")
            raise self._failure from exc

    async def reserved(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A reserved call whose JSON answer must not report an error."""
        result = await self.call(name, arguments)
        text = "".join(getattr(block, "text", "") for block in result.content)
        try:
            payload = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            raise self._error("tb_server_reserved", f"{name} answered non-JSON: {text[:300]!r}") from exc
        if result.is_error or not isinstance(payload, dict) or payload.get("status") == "error":
            message = payload.get("message", text) if isinstance(payload, dict) else text
            raise self._error("tb_server_reserved", f"{name} failed: {str(message)[:1000]}")
        return payload

    async def init(self, config: dict[str, Any]) -> None:
        await self.reserved(INIT, {"config": config})

    async def effects(self) -> dict[str, Any]:
        effects = await self.reserved(EFFECTS, {})
        for key in ("result_db_hash", "golden_db_hash"):
            if not isinstance(effects.get(key), str):
                raise self._error("tb_server_reserved", f"{EFFECTS} answer has no {key}")
        return effects

    async def teardown(self) -> None:
        """Best effort: without Typesense the servers' teardown fails on the index they never made."""
        if self._client is not None:
            try:
                await self.call(TEARDOWN, {})
            except ServerError:
                pass

    async def close(self) -> None:
        """Stop the process (stdin closed, then terminated) and wait for it; safe to call twice."""
        self._stop.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:  # noqa: S110 - the failure was already reported by the call that hit it
                pass
        self._log.close()

    @property
    def alive(self) -> bool:
        return self._client is not None

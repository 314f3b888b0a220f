"""Faults at the MCP boundary of a served domain: the sessions of one `envs.serve` streamable-HTTP process share
nothing, and a tool error is the client's business, not a traceback in the server's log.

One real server process (`python -m envs.serve --domain telecom --transport streamable-http` on a free port of
127.0.0.1) serves the module; every client is the SDK's own `Client` over streamable HTTP, i.e. one MCP session.
The old server kept one sandbox for its lifetime, so a client that never verified could read the profile of a
customer another client had verified (date of birth, internal scores) and suspend their line, and every write
outlived the session that made it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import UNSUPPORTED_PROTOCOL_VERSION, CallToolResult

import envs
from envs.mcp_server import build_session_server
from envs.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 30.0


@dataclass(frozen=True)
class Served:
    """The running server: its MCP endpoint and the file its stderr goes to."""

    url: str
    stderr: Path


@dataclass(frozen=True)
class Holder:
    """A telecom customer with the credentials that verify them and one of their active lines."""

    customer_id: str
    date_of_birth: str
    pin: str
    line_id: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    stderr = tmp_path_factory.mktemp("serve") / "stderr.log"
    command = [sys.executable, "-m", "envs.serve", "--domain", "telecom", "--transport", "streamable-http",
               "--port", str(port)]
    with stderr.open("wb") as sink:
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=sink,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        asyncio.run(_wait_until_serving(url, process))
        yield Served(url, stderr)
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = asyncio.get_running_loop().time() + STARTUP_S
    while process.poll() is None and asyncio.get_running_loop().time() < deadline:
        try:
            async with Client(url) as client:
                await client.list_tools()
                return
        except Exception:  # noqa: BLE001 (not listening yet)
            await asyncio.sleep(0.1)
    raise TimeoutError(f"envs.serve never answered on {url} (exit code {process.poll()})")


@pytest.fixture(scope="module")
def holder() -> Holder:
    row = envs.get_domain("telecom").database.read(
        "SELECT c.customer_id, c.date_of_birth, c.pin, l.line_id FROM customers c JOIN lines l USING (customer_id) "
        "WHERE l.status = ? ORDER BY c.customer_id, l.line_id LIMIT 1", ("active",))[0]
    return Holder(**row)


async def _call(client: Client, tool: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool(tool, arguments)


def _text(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


async def _verify(client: Client, holder: Holder) -> None:
    result = await _call(client, "verify_identity", customer_id=holder.customer_id,
                         date_of_birth=holder.date_of_birth, pin=holder.pin)
    assert not result.is_error, _text(result)


async def _line_status(client: Client, holder: Holder) -> str:
    result = await _call(client, "list_lines", customer_id=holder.customer_id)
    assert not result.is_error, _text(result)
    return next(line["status"] for line in json.loads(_text(result)) if line["line_id"] == holder.line_id)


def _assert_not_verified(result: CallToolResult, holder: Holder) -> None:
    assert result.is_error and f"customer {holder.customer_id} is not verified" in _text(result), _text(result)


def test_a_session_cannot_use_the_verification_of_another(served: Served, holder: Holder) -> None:
    """B, never verified, is refused what A's verification allows A, while A's session is still open."""

    async def scenario() -> None:
        async with Client(served.url) as a, Client(served.url) as b:
            await _verify(a, holder)
            profile = await _call(a, "get_customer", customer_id=holder.customer_id)
            assert not profile.is_error and "INTERNAL_credit_risk_score" in _text(profile)
            _assert_not_verified(await _call(b, "get_customer", customer_id=holder.customer_id), holder)
            _assert_not_verified(await _call(b, "list_lines", customer_id=holder.customer_id), holder)
            _assert_not_verified(await _call(b, "suspend_line", line_id=holder.line_id, reason="customer_request"),
                                 holder)
            assert await _line_status(a, holder) == "active"

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_a_session_does_not_see_the_writes_of_another(served: Served, holder: Holder) -> None:
    """A suspends a line; B, verified in its own right, still finds it active and can suspend it itself."""

    async def scenario() -> None:
        async with Client(served.url) as a, Client(served.url) as b:
            await _verify(a, holder)
            await _verify(b, holder)
            suspended = await _call(a, "suspend_line", line_id=holder.line_id, reason="lost_device")
            assert not suspended.is_error, _text(suspended)
            assert await _line_status(a, holder) == "suspended"
            assert await _line_status(b, holder) == "active"
            again = await _call(b, "suspend_line", line_id=holder.line_id, reason="customer_request")
            assert not again.is_error, _text(again)

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_a_new_session_starts_from_the_initial_state(served: Served, holder: Holder) -> None:
    """What an ended session wrote and whom it verified are gone for the next one."""

    async def scenario() -> None:
        async with Client(served.url) as first:
            await _verify(first, holder)
            assert not (await _call(first, "suspend_line", line_id=holder.line_id, reason="stolen_device")).is_error
        async with Client(served.url) as second:
            _assert_not_verified(await _call(second, "get_customer", customer_id=holder.customer_id), holder)
            await _verify(second, holder)
            assert await _line_status(second, holder) == "active"

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_a_sessionless_request_is_refused(served: Served) -> None:
    """The 2026-07-28 protocol has no sessions, so a client pinned to it could only share state: it is refused
    with the handshake versions named (a client in the default "auto" mode falls back to them, as above)."""

    async def scenario() -> MCPError:
        async with Client(served.url, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as refused:
                await _call(client, "list_plans")
        return refused.value

    refusal = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert refusal.code == UNSUPPORTED_PROTOCOL_VERSION and "initialize handshake" in refusal.message


def test_a_tool_error_reaches_the_client_and_leaves_no_traceback(served: Served, holder: Holder) -> None:
    """Bad arguments, unknown ids and an unknown tool come back as isError results that say what is wrong; the
    server, at log level WARNING, logs each in at most one WARNING line and never a traceback."""
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("suspend_line", {"line_id": holder.line_id, "reason": "bored"}, "reason 'bored'"),
        ("verify_identity", {"customer_id": holder.customer_id, "date_of_birth": holder.date_of_birth},
         "pin is required"),
        ("get_customer", {"customer_id": ["C-1"]}, "customer_id"),
        ("find_customer", {"phone": "+1-000-000-0000"}, "customer not found"),
        ("verify_identity", {"customer_id": "C-00000", "date_of_birth": "2000-01-01", "pin": "0000"},
         "identity check failed"),
        ("suspend_line", {"line_id": "L-00000", "reason": "lost_device"}, "line L-00000 not found"),
        ("no_such_tool", {}, "Unknown tool: no_such_tool"),
    ]
    logged_before = served.stderr.stat().st_size

    async def scenario() -> list[CallToolResult]:
        async with Client(served.url) as client:
            return [await client.call_tool(tool, arguments) for tool, arguments, _ in calls]

    results = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    for (tool, _, expected), result in zip(calls, results, strict=True):
        assert result.is_error and expected in _text(result), (tool, _text(result))
    with served.stderr.open("rb") as log:
        log.seek(logged_before)
        lines = log.read().decode(errors="replace").splitlines()
    assert not any("Traceback" in line or "ERROR" in line for line in lines), "\n".join(lines)
    assert len(lines) <= len(calls) and all("WARNING" in line for line in lines), "\n".join(lines)


def test_a_bug_in_a_tool_body_stays_loud_in_a_session(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A programming error in a body, served per session, still reaches the agent as a bare crash and is logged
    at ERROR with its traceback: only anticipated refusals are quiet."""
    domain = envs.get_domain("telecom")

    def list_plans(db: Sandbox) -> list[dict[str, Any]]:
        return [{}["missing"]]

    monkeypatch.setitem(domain._functions, "list_plans", list_plans)
    server = build_session_server(domain, domain.new_sandbox)

    async def call() -> CallToolResult:
        async with Client(server, mode="legacy") as client:
            return await client.call_tool("list_plans", {})

    with caplog.at_level(logging.WARNING):
        result = asyncio.run(asyncio.wait_for(call(), timeout=30))
    assert result.is_error and _text(result) == "Error executing tool list_plans"
    crashes = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info is not None]
    assert crashes and isinstance(crashes[0].exc_info[1].__cause__, KeyError)  # type: ignore[index]


def test_a_session_sandbox_is_made_per_session_and_closed_when_it_ends() -> None:
    """Two sessions of one server get a sandbox each, on first use; each is closed when its session ends, so an
    abandoned session leaves no database behind (the SDK's per-connection exit stack closes it)."""
    domain = envs.get_domain("telecom")
    made: list[Sandbox] = []

    def new_sandbox() -> Sandbox:
        made.append(domain.new_sandbox())
        return made[-1]

    server = build_session_server(domain, new_sandbox)

    async def two_sessions() -> None:
        async with Client(server, mode="legacy") as a, Client(server, mode="legacy") as b:
            assert made == []
            for client in (a, b, a, b):
                assert not (await client.call_tool("list_plans", {})).is_error
            assert len(made) == 2
            for sandbox in made:
                sandbox.raw("SELECT 1")  # open while its session is

    asyncio.run(asyncio.wait_for(two_sessions(), timeout=30))
    for sandbox in made:
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            sandbox.raw("SELECT 1")

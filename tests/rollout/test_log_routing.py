"""Where log records go (rollout.log_routing): a refused tool call of a real MCP session, an INFO record of the
library, reaches the log file and not the terminal; warnings and errors reach both; a command's own INFO
records reach the terminal only where it names them; `verbose` shows everything."""

from __future__ import annotations

import asyncio
import logging

import pytest

import envs
from envs.loading import load_tasks
from rollout.log_routing import OWN_PACKAGES, ROUTED, route_logs

REFUSED = "Tool 'find_member' failed"  # what the MCP server logs at INFO when a call is refused


async def refused_tool_call() -> None:
    """A real session of a built-in library task whose agent asks for a member that does not exist."""
    session = await envs.open_session(load_tasks("library", "heldout")[0])
    try:
        await session.call_tool("find_member", {"email": "nobody@example.invalid"})
    finally:
        await session.close()


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    level = root.level
    yield
    for handler in [h for h in root.handlers if getattr(h, ROUTED, False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)
    logging.captureWarnings(False)


def test_a_refused_tool_call_goes_to_the_log_file_and_warnings_to_both(tmp_path, capfd) -> None:
    log_file = tmp_path / "run" / "log.txt"
    route_logs(log_file)
    asyncio.run(refused_tool_call())
    logging.getLogger("tbjax.trainer.loop").info("engine now serves weight version 3")
    logging.getLogger("orbax").warning("a disk filling up")
    terminal = capfd.readouterr().err
    written = log_file.read_text()
    assert REFUSED not in terminal and "weight version 3" not in terminal
    assert f"INFO mcp.server.mcpserver.server: {REFUSED}" in written and "weight version 3" in written
    assert "WARNING orbax: a disk filling up" in terminal and "a disk filling up" in written
    assert not [line for line in terminal.splitlines() if line.startswith(("INFO ", "DEBUG "))]


def test_a_commands_own_records_reach_the_terminal_and_verbose_shows_all(tmp_path, capfd) -> None:
    route_logs(tmp_path / "log.txt", own=OWN_PACKAGES)
    logging.getLogger("rollout.evaluate").info("pass@1 0.5 over 3 tasks")
    logging.getLogger("httpx").info("HTTP Request: POST /generate")
    terminal = capfd.readouterr().err
    assert "INFO rollout.evaluate: pass@1 0.5 over 3 tasks" in terminal and "HTTP Request" not in terminal
    route_logs(tmp_path / "log.txt", verbose=True)
    asyncio.run(refused_tool_call())
    assert REFUSED in capfd.readouterr().err
    assert (tmp_path / "log.txt").read_text().count("HTTP Request: POST /generate") == 1

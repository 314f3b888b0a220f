"""A tiny stand-in for a ThinkingBox domain server, for tests without the real clone: the same reserved-tool
protocol over MCP stdio, a notes table as its whole database, and tools that crash or hang on purpose.

Run as `python -m fake_tb_server` with this folder on PYTHONPATH (the tests write servers.yaml so)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="fake_notes", log_level="WARNING")
STATE: dict[str, Any] = {"notes": [], "config": {}, "initial": []}


def _apply(notes: list[dict[str, Any]], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    if tool == "add_note":
        if not args.get("text"):
            return {"error": "text must not be empty"}
        note = {"id": str(len(notes) + 1), "text": args["text"]}
        notes.append(note)
        return {"item": note}
    if tool == "list_notes":
        return {"items": notes}
    return {"error": f"unknown tool {tool}"}


def _hash(notes: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(notes, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@server.tool(name="__reserved__init")
def initialize(config: dict) -> str:
    if config.get("fail_init"):
        return json.dumps({"status": "error", "message": "asked to fail"})
    STATE["config"] = config
    STATE["notes"] = copy.deepcopy((config.get("data_patch") or {}).get("notes") or [])
    STATE["initial"] = copy.deepcopy(STATE["notes"])
    return json.dumps({})


@server.tool(name="__reserved__geteffects")
def geteffects() -> str:
    golden = copy.deepcopy(STATE["initial"])
    for step in (STATE["config"].get("golden_test_case") or {}).get("tool_interactions") or []:
        _apply(golden, step["tool"], step.get("parameters") or {})
    diff = [] if golden == STATE["notes"] else [
        {"path": "notes", "type": "length mismatch", "result": len(STATE["notes"]), "golden": len(golden)}]
    return json.dumps({"result_db_hash": _hash(STATE["notes"]), "golden_db_hash": _hash(golden), "diff": diff,
                       "rubrics": STATE["config"].get("rubrics"),
                       "rubrics_yesno": STATE["config"].get("rubrics_yesno") or []})


@server.tool(name="__reserved__teardown")
def teardown() -> str:
    return json.dumps({"status": "ok"})


@server.tool()
def add_note(text: str) -> str:
    """Add a note."""
    return json.dumps(_apply(STATE["notes"], "add_note", {"text": text}))


@server.tool()
def list_notes() -> str:
    """List the notes."""
    return json.dumps(_apply(STATE["notes"], "list_notes", {}))


@server.tool()
def crash() -> str:
    """Kill the server process (tests: a server that dies mid-episode)."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 30.0) -> str:
    """Block (tests: a server that stops answering)."""
    time.sleep(seconds)
    return "{}"


if __name__ == "__main__":
    server.run(transport="stdio")

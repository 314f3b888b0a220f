"""The command lines: validate (exit codes) and serve (a real stdio MCP server process)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

import envs.registry
import envs.validate
from envs.domain import Domain
from envs.tasks import TaskKind
from envs.templates import TaskTemplate

REPO = Path(__file__).resolve().parents[2]


def test_validate_passes_for_telecom_and_reports_rates() -> None:
    done = subprocess.run([sys.executable, "-m", "envs.validate", "--domain", "telecom"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "100.0%" in done.stdout and "all checks passed" in done.stdout


def test_validate_exits_non_zero_on_an_invalid_task(telecom: Domain, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    good = next(t for t in telecom.templates if t.kind == TaskKind.DIRECT)

    def build_broken(ctx):  # noqa: ANN001, ANN202 (a template body)
        draft = good.build(ctx)
        return type(draft)(scenario=draft.scenario, golden_path=[*draft.golden_path[:-1]])

    broken = Domain(**{**{f: getattr(telecom, f) for f in Domain.__dataclass_fields__},
                       "name": "broken", "templates": [TaskTemplate("no_change", TaskKind.DIRECT, good.split,
                                                                    2, build_broken)]})
    broken.database  # noqa: B018 (build the template before patching the registry)
    everything = {"broken": broken, "telecom": telecom}
    monkeypatch.setattr(envs.registry, "builtin_domains", lambda: everything)
    assert envs.validate.main(["--domain", "broken"]) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "broken/no_change/000" in out and "must change" in out


def test_serve_stdio_is_a_real_mcp_server(telecom: Domain) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "envs.serve", "--domain", "telecom"],
                                   cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)})

    async def talk() -> tuple[list[str], str]:
        async with Client(params) as client:
            tools = await client.list_tools()
            result = await client.call_tool("list_plans", {})
            return [t.name for t in tools.tools], result.content[0].text

    names, plans = asyncio.run(asyncio.wait_for(talk(), timeout=60))
    assert names == list(telecom.mcp_tools)
    assert [p["plan_code"] for p in json.loads(plans)][:2] == ["BASIC5", "LEGACY10"]


def test_serve_rejects_unknown_domains() -> None:
    done = subprocess.run([sys.executable, "-m", "envs.serve", "--domain", "nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "argument --domain: unknown domain 'nope'; known domains: [" in done.stderr


def test_serve_streamable_http_listens_on_localhost() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "envs.serve", "--domain", "telecom", "--transport",
                               "streamable-http", "--port", str(port)], cwd=REPO, stderr=subprocess.DEVNULL)

    async def first_result() -> str:
        for _ in range(150):
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    return (await client.call_tool("list_plans", {})).content[0].text
            except Exception:  # noqa: BLE001 (the server is still starting)
                await asyncio.sleep(0.1)
        raise TimeoutError(f"envs.serve never answered on 127.0.0.1:{port}")

    try:
        assert json.loads(asyncio.run(first_result()))[0]["plan_code"] == "BASIC5"
    finally:
        server.terminate()
        server.wait(timeout=10)

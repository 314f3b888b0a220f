"""A domain's tools as an MCP server bound to one sandbox."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from envs.domain import Domain
from envs.sandbox import Sandbox


def build_server(domain: Domain, sandbox: Sandbox) -> MCPServer:
    """An `MCPServer` whose tools read and write `sandbox` only (tool schemas are built once per domain)."""
    return MCPServer(
        name=f"tbjax-{domain.name}",
        instructions=domain.system_prompt(),
        tools=domain.bind_tools(sandbox),
        log_level="WARNING",  # tool refusals are the agent's business, not log noise at thousands of episodes
    )

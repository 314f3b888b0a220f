"""Serve one domain's tools as an MCP server for external agents.

    python -m envs.serve --domain telecom [--task ID] [--transport stdio|streamable-http] [--port 8000]

Every sandbox starts as the domain template, or as a task's initial state with --task.

stdio serves one client, so the process owns one sandbox for its lifetime. Streamable HTTP serves many at once:
each MCP session (one `Mcp-Session-Id`, from the client's initialize handshake to its DELETE or the idle timeout)
gets a fresh sandbox of its own, dropped when the session ends, so no client reads, writes or rides on the
identity checks of another (`envs.mcp_server.build_session_server`). The sessionless 2026-07-28 protocol is
refused over HTTP; the SDK's `Client` then falls back to the handshake by itself.
Streamable HTTP listens on 127.0.0.1 unless --host says otherwise.
"""

from __future__ import annotations

import argparse

from envs.loading import load_tasks
from envs.mcp_server import build_server, build_session_server
from envs.registry import domain_argument, get_domain


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m envs.serve", description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--domain", required=True, type=domain_argument,
                        help="a known domain by name, or module:attr naming a Domain of your own")
    parser.add_argument("--task", help="start from this task's initial state (id as in load_tasks)")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)

    domain = get_domain(args.domain)
    patch = {}
    if args.task:
        by_id = {t.id: t for t in load_tasks(args.domain)}
        if args.task not in by_id:
            parser.error(f"no task {args.task!r} in domain {args.domain}; ids look like {next(iter(by_id))}")
        patch = by_id[args.task].initial_patch
    if args.transport == "stdio":
        build_server(domain, domain.new_sandbox(patch)).run("stdio")
    else:
        domain.new_sandbox(patch).close()  # build the template and apply the patch once: fail before listening
        server = build_session_server(domain, lambda: domain.new_sandbox(patch))
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()

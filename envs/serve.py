"""Serve one domain's tools as an MCP server for external agents.

    python -m envs.serve --domain telecom [--task ID] [--transport stdio|streamable-http] [--port 8000]

The server owns one sandbox for its lifetime: the domain template, or a task's initial state with --task.
Streamable HTTP listens on 127.0.0.1 unless --host says otherwise.
"""

from __future__ import annotations

import argparse

from envs.loading import load_tasks
from envs.mcp_server import build_server
from envs.registry import builtin_domains, get_domain


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m envs.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--domain", required=True, choices=sorted(builtin_domains()))
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
    server = build_server(domain, domain.new_sandbox(patch))
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()

"""Environment overhead per episode: in-process sandboxes and MCP versus one server process per conversation.

    python scripts/bench/envs_overhead.py [--domain telecom] [--repeats 300] [--process-starts 3]

Medians of: sandbox creation (template backup + task patch), one tool call through the in-process MCP client
(a read and a write), grading a passing episode (state hash), grading a failing one (hash + golden replay +
diff), a whole session open/close; beside the cost of starting `python -m envs.serve` over stdio and getting
its first tool result, which is what a server-process-per-conversation design pays every episode.
Targets for a domain with 10k+ rows: create <= 2 ms, tool call <= 1 ms, verify <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcp import Client, StdioServerParameters
from rich.console import Console
from rich.table import Table

import envs
from envs.verifier import grade

REPO = Path(__file__).resolve().parents[2]


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def median_ms_async(fn: Callable[[], Awaitable[object]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def in_process(domain_name: str, repeats: int) -> dict[str, float]:
    domain = envs.get_domain(domain_name)
    tasks = envs.load_tasks(domain_name)
    patched = next((t for t in tasks if t.initial_patch), tasks[0])
    direct = next(t for t in tasks if t.changes_state)
    quiet = next(t for t in tasks if t.kind == "forbidden")  # do-nothing passes: no diff to explain
    results = {"create sandbox (backup + patch)": median_ms(
        lambda: domain.new_sandbox(patched.initial_patch).close(), repeats)}

    session = await envs.open_session(direct)
    for call in direct.golden_path[:-1]:
        await session.call_tool(call.tool, call.args)
    read = direct.golden_path[0]
    results["tool call, read (MCP in-process)"] = await median_ms_async(
        lambda: session.call_tool(read.tool, read.args), repeats)
    await session.close()

    write_times, verify_times = [], []
    for _ in range(max(20, repeats // 5)):
        session = await envs.open_session(direct)
        for call in direct.golden_path[:-1]:
            await session.call_tool(call.tool, call.args)
        last = direct.golden_path[-1]
        start = time.perf_counter()
        await session.call_tool(last.tool, last.args)
        middle = time.perf_counter()
        await grade(domain, direct, session.sandbox, [])
        write_times.append((middle - start) * 1000)
        verify_times.append((time.perf_counter() - middle) * 1000)
        await session.close()
    results["tool call, write (MCP in-process)"] = statistics.median(write_times)
    results["verify, passing (hash of written tables)"] = statistics.median(verify_times)

    async def failing_grade() -> None:
        sandbox = domain.new_sandbox(direct.initial_patch)
        await grade(domain, direct, sandbox, [])
        sandbox.close()

    results["verify, failing (create + hash + replay + diff)"] = await median_ms_async(
        failing_grade, max(10, repeats // 10))

    async def open_close() -> None:
        opened = await envs.open_session(quiet)
        await opened.close()

    results["episode overhead: session open + close"] = await median_ms_async(open_close, repeats // 3)
    return results


async def process_per_conversation(domain_name: str, starts: int) -> dict[str, float]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "envs.serve", "--domain", domain_name],
                                   cwd=str(REPO))
    probe = next(name for name, tool in envs.get_domain(domain_name).mcp_tools.items()
                 if not tool.parameters.get("required"))  # a tool callable without arguments
    start_times, call_times = [], []
    for _ in range(starts):
        start = time.perf_counter()
        async with Client(params) as client:
            await client.call_tool(probe, {})
            start_times.append(time.perf_counter() - start)
            for _ in range(20):
                t = time.perf_counter()
                await client.call_tool(probe, {})
                call_times.append(time.perf_counter() - t)
    return {"server process start to first result (stdio)": statistics.median(start_times) * 1000,
            "tool call (stdio process)": statistics.median(call_times) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="telecom")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--process-starts", type=int, default=3)
    args = parser.parse_args()
    rows = envs.get_domain(args.domain).database.row_count()
    measured = asyncio.run(in_process(args.domain, args.repeats))
    measured |= asyncio.run(process_per_conversation(args.domain, args.process_starts))

    targets = {"create sandbox (backup + patch)": 2.0, "tool call, read (MCP in-process)": 1.0,
               "tool call, write (MCP in-process)": 1.0, "verify, passing (hash of written tables)": 10.0}
    baseline = measured["server process start to first result (stdio)"]
    table = Table(title=f"envs overhead: domain {args.domain}, {rows} rows, medians")
    for column in ("measure", "ms", "target ms", "process start / this"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for name, ms in measured.items():
        target = targets.get(name)
        verdict = "" if target is None else (" ok" if ms <= target else " OVER")
        table.add_row(name, f"{ms:.3f}", f"{target:.0f}{verdict}" if target else "", f"{baseline / ms:,.0f}x")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()

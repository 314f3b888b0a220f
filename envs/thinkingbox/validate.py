"""Checks the ThinkingBox adapter against the benchmark's own expectations, with real server processes:

    python -m envs.thinkingbox.validate --data CLONE --python VENV/bin/python [--limit N] [--jobs 2]

The oracle (golden interactions replayed through the session) must reach the golden state on every task;
the do-nothing agent must reach it only where the golden state is the initial state (1 of the 507). Prints
counts per domain and seconds per task; `--out FILE` writes one JSON line per attempt. Rubrics are not
judged here (neither agent writes a reply); the counts are of final states.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard, get_args

from envs.thinkingbox.agents import AgentName, Attempt, attempt
from envs.thinkingbox.config import ThinkingBoxConfig
from envs.thinkingbox.grading import UNJUDGED
from envs.thinkingbox.session import ThinkingBoxSuite


async def run_agent(suite: ThinkingBoxSuite, agent: AgentName, jobs: int) -> list[Attempt]:
    limit = asyncio.Semaphore(jobs)
    done = 0

    async def one(task_id: str) -> Attempt:
        nonlocal done
        async with limit:
            result = await attempt(suite, task_id, agent)
        done += 1
        if done % 25 == 0 or done == len(suite.tasks):
            print(f"  {agent}: {done}/{len(suite.tasks)}", file=sys.stderr, flush=True)
        return result

    return list(await asyncio.gather(*(one(task.id) for task in suite.tasks)))


def summary(agent: AgentName, attempts: list[Attempt], wall_s: float, jobs: int) -> str:
    by_domain: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_domain[a.domain].append(a)
    matched = sum(a.state_matches for a in attempts)
    errors = [a for a in attempts if a.system_error and a.verdict is None]
    totals = [a.seconds["total"] for a in attempts]
    tool_errors = sum(a.tool_errors for a in attempts)
    unjudged = sum(bool(a.verdict and a.verdict.system_error == UNJUDGED) for a in attempts)
    lines = [f"{agent}: final state == golden state on {matched}/{len(attempts)} tasks; "
             f"system errors {len(errors)}; golden calls answered with an error {tool_errors}; "
             f"rubric tasks with the golden state, rubrics unjudged (no reply, no judge): {unjudged}"]
    for domain, group in sorted(by_domain.items()):
        lines.append(f"  {domain:36s} {sum(a.state_matches for a in group):4d}/{len(group)}")
    for phase in ("open", "tools", "close", "total"):
        values = [a.seconds[phase] for a in attempts if phase in a.seconds]
        if values:
            lines.append(f"  seconds per task, {phase:5s}: mean {statistics.mean(values):.2f}  "
                         f"median {statistics.median(values):.2f}  max {max(values):.2f}")
    lines.append(f"  wall {wall_s:.0f}s with {jobs} concurrent servers = {wall_s / max(len(totals), 1):.2f}s per task")
    for a in errors[:10]:
        lines.append(f"  SYSTEM ERROR {a.task_id}: {a.system_error.splitlines()[0] if a.system_error else ''}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m envs.thinkingbox.validate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="local clone of microsoft/thinkingbox-data")
    parser.add_argument("--python", required=True, help="the servers' Python 3.12 interpreter")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the test list")
    parser.add_argument("--jobs", type=int, default=2, help="server processes at once")
    parser.add_argument("--agents", type=agent_names, default="oracle,nothing", help="comma-separated: oracle, nothing")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines, one per attempt")
    return parser.parse_args(argv)


def agent_names(text: str) -> list[AgentName]:
    """The agents `--agents` lists; an unknown name is a usage error naming it."""
    agents: list[AgentName] = []
    for name in (part.strip() for part in text.split(",")):
        if not _is_agent(name):
            raise argparse.ArgumentTypeError(f"unknown agent {name!r}; choose from {', '.join(get_args(AgentName))}")
        agents.append(name)
    return agents


def _is_agent(name: str) -> TypeGuard[AgentName]:
    return name in get_args(AgentName)


async def main_async(args: argparse.Namespace) -> int:
    suite = ThinkingBoxSuite.load(ThinkingBoxConfig(data=args.data, python=args.python), args.limit)
    print(f"{len(suite.tasks)} tasks; {sum(bool(c.rubrics) for c in suite.cases.values())} with yes/no rubrics")
    failed = False
    records = []
    agents: list[AgentName] = args.agents
    for agent in agents:
        start = time.perf_counter()
        attempts = await run_agent(suite, agent, args.jobs)
        print(summary(agent, attempts, time.perf_counter() - start, args.jobs))
        records += attempts
        if agent == "oracle":
            failed |= any(not a.state_matches for a in attempts)
            for a in attempts:
                if a.verdict is not None and not a.state_matches:
                    print(a.verdict.report())
        else:
            for a in attempts:
                if a.state_matches:
                    print(f"  do-nothing reaches the golden state: {a.task_id}")
    if args.out:
        with args.out.open("w") as handle:
            for a in records:
                handle.write(json.dumps({"task_id": a.task_id, "domain": a.domain, "agent": a.agent,
                                         "state_matches": a.state_matches, "system_error": a.system_error,
                                         "seconds": a.seconds, "tool_errors": a.tool_errors}) + "\n")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

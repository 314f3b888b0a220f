"""Validate domains: every task's golden path must pass through the real MCP tools.

    python -m envs.validate [--domain X]   # X: a built-in or installed domain, or module:attr

For each domain: task counts by kind and split; the oracle agent (golden path through the in-process MCP
client, then the reference answer) must pass 100%; the do-nothing agent must pass exactly the tasks whose
correct outcome is "no change and nothing to say" (forbidden and leak tasks). Exits 1 on any invalid task or
mismatch. Tasks whose rubrics need an LLM judge are counted as unchecked, not failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from envs.errors import InvalidTaskError
from envs.judges.rules import check_rule
from envs.loading import load_tasks
from envs.registry import domain_argument, known_domains
from envs.session import open_session
from envs.tasks import Split, Task, TaskKind


@dataclass
class DomainReport:
    name: str
    tasks: list[Task] = field(default_factory=list)
    invalid: str | None = None
    oracle_passed: int = 0
    nothing_passed: int = 0
    unchecked: int = 0
    failures: list[str] = field(default_factory=list)
    load_s: float = 0.0
    oracle_ms: float = 0.0
    nothing_ms: float = 0.0

    @property
    def expected_nothing(self) -> int:
        """Tasks a do-nothing agent should pass: unchanged state and every rubric satisfied by silence."""
        return sum(1 for t in self.tasks if not t.changes_state and all(
            r.kind != "llm_yes_no" and check_rule(r, "").passed for r in t.rubrics))

    @property
    def ok(self) -> bool:
        checked = len(self.tasks) - self.unchecked
        return self.invalid is None and self.oracle_passed == checked and self.nothing_passed == self.expected_nothing


async def _oracle(task: Task) -> tuple[bool | None, str]:
    session = await open_session(task)
    for call in task.golden_path:
        result = await session.call_tool(call.tool, call.args)
        if result.is_error:
            await session.close()
            return False, f"{task.id}: golden call {call.tool} returned an error through MCP: {result.content}"
    verdict = await session.close(task.reference_answer)
    if verdict.system_error:
        return None, verdict.system_error
    return verdict.passed, verdict.report()


async def _do_nothing(task: Task) -> bool | None:
    session = await open_session(task)
    verdict = await session.close()
    return None if verdict.system_error else verdict.passed


async def validate_domain(name: str) -> DomainReport:
    report = DomainReport(name)
    start = time.perf_counter()
    try:
        report.tasks = load_tasks(name)
    except InvalidTaskError as exc:
        report.invalid = str(exc)
        return report
    report.load_s = time.perf_counter() - start
    start = time.perf_counter()
    for task in report.tasks:
        passed, detail = await _oracle(task)
        report.unchecked += passed is None
        report.oracle_passed += bool(passed)
        if passed is False:
            report.failures.append(detail)
    report.oracle_ms = (time.perf_counter() - start) * 1000 / len(report.tasks)
    start = time.perf_counter()
    for task in report.tasks:
        report.nothing_passed += bool(await _do_nothing(task))
    report.nothing_ms = (time.perf_counter() - start) * 1000 / len(report.tasks)
    return report


def render(reports: list[DomainReport], console: Console) -> None:
    table = Table(title="envs.validate")
    columns = ["domain", "tasks", "train/heldout", *[k.value for k in TaskKind], "oracle pass", "no-change tasks",
               "do-nothing pass (expected)", "load s", "oracle ms/task", "do-nothing ms/task", "status"]
    for column in columns:
        table.add_column(column, justify="right" if column != "domain" else "left")
    for r in reports:
        if r.invalid:
            table.add_row(r.name, *["-"] * 14, "[red]INVALID[/red]")
            continue
        kinds, splits, n = Counter(t.kind for t in r.tasks), Counter(t.split for t in r.tasks), len(r.tasks)
        table.add_row(
            r.name, str(n), f"{splits[Split.TRAIN]}/{splits[Split.HELDOUT]}", *[str(kinds[k]) for k in TaskKind],
            f"{r.oracle_passed}/{n - r.unchecked} ({100 * r.oracle_passed / max(1, n - r.unchecked):.1f}%)",
            str(sum(1 for t in r.tasks if not t.changes_state)),
            f"{r.nothing_passed}/{n} ({100 * r.nothing_passed / n:.1f}%) ({r.expected_nothing})",
            f"{r.load_s:.2f}", f"{r.oracle_ms:.1f}", f"{r.nothing_ms:.1f}",
            "[green]ok[/green]" if r.ok else "[red]FAIL[/red]",
        )
    console.print(table)
    for r in reports:
        if r.invalid:
            console.print(f"[red]{r.name}: {r.invalid}[/red]")
        for failure in r.failures:
            console.print(f"[red]{failure}[/red]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs.validate", description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--domain", type=domain_argument,
                        help="validate one domain: a known one by name, or module:attr (default: every known one)")
    args = parser.parse_args(argv)
    names = [args.domain] if args.domain else list(known_domains())
    reports = [asyncio.run(validate_domain(name)) for name in names]
    render(reports, Console(width=200))
    total = sum(len(r.tasks) for r in reports)
    ok = all(r.ok for r in reports)
    print(f"{total} valid tasks in {len(reports)} domain(s); {'all checks passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

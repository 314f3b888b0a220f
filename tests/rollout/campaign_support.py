"""Synthetic campaigns for the metric, report and comparison tests: per-task success counts with a given
total, number of tasks at k/k and number of tasks with any success (the seed's table), as counts or records."""

from __future__ import annotations

from pathlib import Path

from rollout.metrics import TaskCounts
from rollout.records import TrialRecord, Usage

DOMAINS = ("retail", "travel", "insurance", "neobank", "consulting")


def success_counts(tasks: int, trials: int, successes: int, all_pass: int, any_pass: int) -> list[int]:
    """Successes per task: `all_pass` tasks at trials/trials, tasks - any_pass at 0, and the rest spread as
    evenly as possible over the remaining tasks, each strictly between 0 and trials."""
    middle = any_pass - all_pass
    rest = successes - all_pass * trials
    base, extra = divmod(rest, middle)
    if not (1 <= base and base + (extra > 0) <= trials - 1):
        raise ValueError("these totals cannot be spread with every middle task strictly between 0 and trials")
    counts = [trials] * all_pass + [base + 1] * extra + [base] * (middle - extra) + [0] * (tasks - any_pass)
    assert sum(counts) == successes and len(counts) == tasks
    return counts


def task_counts(per_task: list[int], trials: int) -> list[TaskCounts]:
    return [TaskCounts(f"t{i:04d}", DOMAINS[i % len(DOMAINS)], trials, c) for i, c in enumerate(per_task)]


def records(per_task: list[int], trials: int, *, model: str = "policy", usage_totals: dict[str, int] | None = None,
            task_ids: list[str] | None = None) -> list[TrialRecord]:
    """One record per trial (the first c trials of a task pass); `usage_totals` (prompt, cached, completion
    tokens of the campaign) are spread over the trials, the remainder on the first trial."""
    total_trials = len(per_task) * trials
    totals = usage_totals or {}
    share = {name: divmod(value, total_trials) for name, value in totals.items()}
    out = []
    for i, c in enumerate(per_task):
        for trial in range(trials):
            first = not out
            usage = {name: q + (r if first else 0) for name, (q, r) in share.items()}
            out.append(TrialRecord(
                task_id=(task_ids[i] if task_ids else f"t{i:04d}"), domain=DOMAINS[i % len(DOMAINS)], trial=trial,
                passed=trial < c, system_error=None, termination="user_done", turns=3, usage=Usage(**usage),
                model=model, weight_version="0", seconds=1.0))
    return out


def write_records(path: Path, recs: list[TrialRecord]) -> Path:
    """`recs` as a trials.jsonl at `path`, one record a line as rollout.evaluate appends them."""
    path.write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return path

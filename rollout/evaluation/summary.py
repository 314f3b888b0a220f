"""A campaign's summary (`summary.json`, a public contract) from its trial records.

Keys: tasks, trials, k, pass@1, pass@k, pass^k {combinatorial, plugin}, observed_k_of_k {count, share},
all_clean_trials_passed {count, share}, system_errors {total, by_kind}, tokens,
cost_usd {campaign, per_trial, per_success, per_observed_k_of_k}, domains {name: the same keys}. Shares are
fractions in [0, 1].

Conventions: `tasks` are tasks with at least one clean trial, `trials` the clean (scored) trials; trials lost
to system errors are counted in `system_errors` beside them and in no denominator of a score. `k` is the
campaign's trials per task (the most recorded for one task). observed k/k counts, strictly, the tasks with k
scored trials that all passed (a task that lost a trial to a system error is not one); all_clean_trials_passed
counts the tasks whose every scored trial passed, lost trials ignored (the gap between the two is what system
errors hid). pass@k / pass^k average over the tasks with at least k scored trials. Cost is spent by every
trial run, system errors included, so `per_trial` divides by all of them; a model without a price makes the
cost null.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rollout.evaluation.prices import PriceTable
from rollout.metrics import (
    TaskCounts,
    all_clean_trials_passed,
    cost_breakdown,
    jeffreys_interval,
    observed_k_of_k,
    pass_at_1,
    pass_at_k_table,
    pass_hat_k_tables,
    reported_ks,
    sum_usage,
    trial_cost,
)
from rollout.records import TrialRecord, task_counts, usage_dict


def campaign_k(records: Sequence[TrialRecord]) -> int:
    """Trials per task: the most trials (clean or not) recorded for one task."""
    per_task = Counter(r.task_id for r in records)
    return max(per_task.values(), default=0)


def score_block(counts: Sequence[TaskCounts], k: int) -> dict[str, Any]:
    """The scoring keys for a set of tasks (pure: counts in, numbers out)."""
    ks = reported_ks(k)
    return {
        "tasks": sum(1 for t in counts if t.n > 0),
        "trials": sum(t.n for t in counts),
        "k": k,
        "pass@1": pass_at_1(counts),
        "pass@k": pass_at_k_table(counts, ks),
        "pass^k": pass_hat_k_tables(counts, ks),
        "observed_k_of_k": observed_k_of_k(counts, k),
        "all_clean_trials_passed": all_clean_trials_passed(counts),
    }


def _campaign_cost(records: Sequence[TrialRecord], prices: PriceTable | None) -> float | None:
    total = 0.0
    for record in records:
        cost = trial_cost(usage_dict(record), prices.price(record.model) if prices else None)
        if cost is None:
            return None
        total += cost
    return total


def _block(records: Sequence[TrialRecord], k: int, prices: PriceTable | None) -> dict[str, Any]:
    counts = task_counts(records)
    block = score_block(counts, k)
    errors = Counter(r.system_error for r in records if r.system_error is not None)
    block["system_errors"] = {"total": sum(errors.values()), "by_kind": dict(sorted(errors.items()))}
    usage = sum_usage([usage_dict(r) for r in records])
    total = usage["prompt_tokens"] + usage["completion_tokens"]
    block["tokens"] = {**usage, "total": total, "per_trial": total / len(records) if records else None}
    block["malformed_tool_calls"] = sum(r.malformed_tool_calls for r in records)
    block["cost_usd"] = cost_breakdown(_campaign_cost(records, prices), len(records),
                                       sum(t.c for t in counts), block["observed_k_of_k"]["count"])
    return block


def summarize(records: Sequence[TrialRecord], prices: PriceTable | None = None, k: int | None = None
              ) -> dict[str, Any]:
    """summary.json's content for `records` (all domains, then each domain under `domains`)."""
    k = campaign_k(records) if k is None else k
    summary = _block(records, k, prices)
    domains = sorted({r.domain for r in records})
    summary["domains"] = {d: _block([r for r in records if r.domain == d], k, prices) for d in domains}
    return summary


def task_rows(records: Sequence[TrialRecord]) -> list[dict[str, Any]]:
    """Per task: n clean trials, c successes, system errors and the 95% Jeffreys interval (tasks.jsonl)."""
    errors = Counter(r.task_id for r in records if r.system_error is not None)
    rows = []
    for t in task_counts(records):
        interval = list(jeffreys_interval(t.n, t.c)) if t.n else None
        rows.append({"task_id": t.task_id, "domain": t.domain, "n": t.n, "c": t.c,
                     "system_errors": errors.get(t.task_id, 0), "jeffreys_95": interval})
    return rows

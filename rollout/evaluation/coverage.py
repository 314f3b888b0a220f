"""Whether a campaign's scores rest on exactly the trials it set out to run: every (task, trial) recorded once
(trial files refuse a second record) and none lost to a system error. A campaign short of that still reports
its scores, over what was recorded, but says so (summary.json's `coverage`, a banner in report.md), and
rollout.compare refuses it unless told otherwise: a pass@k over whichever trials happened to survive is not
the number it claims to be.

System errors are infrastructure's, never the policy's, so they are retried rather than scored: `set_aside`
moves a campaign's system-error records out of its trial file (into `SET_ASIDE_FILE` beside it, where they stay
counted), so that a resumed campaign runs those trials again (`rollout.evaluate --resume
--retry-system-errors`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from rollout.evaluation.summary import campaign_k
from rollout.records import TrialRecord, atomic_write, read_records

SET_ASIDE_FILE = "system_errors.jsonl"  # system-error records taken out of a campaign's trial file to retry


class InexactCampaignError(ValueError):
    """A campaign compared while trials are missing or lost to system errors."""


def coverage(records: Sequence[TrialRecord], expected: Collection[tuple[str, int]] | None = None,
             set_aside: int = 0) -> dict[str, Any]:
    """summary.json's `coverage`: the (task, trial) pairs expected (default: trials 0..k-1 of every recorded
    task, k the most recorded for one), how many have no record, how many are system errors, and `exact` when
    neither happened; `set_aside`: system errors taken out to retry so far."""
    if expected is None:
        k = campaign_k(records)
        expected = {(task, trial) for task in {r.task_id for r in records} for trial in range(k)}
    recorded = {r.key for r in records}
    missing = sum(1 for key in expected if key not in recorded)
    errors = sum(1 for r in records if r.system_error is not None and r.key in expected)
    return {"exact": not missing and not errors, "expected": len(expected), "missing": missing,
            "system_errors": errors, "system_errors_retried": set_aside}


def describe(block: dict[str, Any]) -> str:
    """One line on what keeps a campaign from being exact."""
    return (f"{block['missing']} of {block['expected']} trials missing and {block['system_errors']} lost to "
            "system errors")


def set_aside(trials: Path, expected: Collection[tuple[str, int]]) -> int:
    """Moves the system-error records of `expected` trials from `trials` to SET_ASIDE_FILE beside it (appended),
    so that resuming runs them again; returns how many it moved."""
    if not trials.exists():
        return 0
    records = read_records(trials, repair=True)
    errors = [r for r in records if r.system_error is not None and r.key in expected]
    if not errors:
        return 0
    aside = trials.parent / SET_ASIDE_FILE
    kept = "".join(r.model_dump_json() + "\n" for r in records if not any(r is e for e in errors))
    previous = aside.read_text() if aside.exists() else ""
    atomic_write(aside, previous + "".join(r.model_dump_json() + "\n" for r in errors))  # before they leave
    atomic_write(trials, kept)
    return len(errors)


def retried(directory: Path) -> int:
    """System-error records set aside in `directory` so far (a trial retried twice and lost twice counts twice)."""
    aside = directory / SET_ASIDE_FILE
    return sum(1 for line in aside.read_text().splitlines() if line.strip()) if aside.exists() else 0


def campaign_coverage(path: Path, records: Sequence[TrialRecord]) -> dict[str, Any]:
    """The coverage of the campaign whose trial file is `path`: its summary.json's where one is beside it (it
    knows the tasks the campaign set out to run, which records alone cannot), else what the records show."""
    summary = path.parent / "summary.json"
    if summary.is_file() and "coverage" in (written := json.loads(summary.read_text())):
        return written["coverage"]
    return coverage(records, set_aside=retried(path.parent))


def refuse_inexact(name: str, path: Path, block: dict[str, Any]) -> None:
    """InexactCampaignError naming campaign `name` (trial file `path`) and the fix, unless `block` is exact."""
    if not block["exact"]:
        raise InexactCampaignError(
            f"campaign {name} ({path}) is not exact: {describe(block)}; run the missing and system-error trials "
            "again (python -m rollout.evaluate with the campaign's flags and --resume --retry-system-errors), or "
            "pass --allow-inexact to compare what was recorded")

"""A ThinkingBox verdict from the server's effects and the agent's last reply.

Pass = the final-state hash equals the golden hash (the server replays the golden interactions on a fresh
backend) and every yes/no rubric is judged yes on the last reply. Rubrics are only asked when the state
matches (a wrong state fails whatever the reply says). With rubrics but no judge configured the verdict is
a system error of kind `rubrics_unjudged`: reported beside the results, never silently passed or failed.
"""

from __future__ import annotations

import re
from typing import Any

from envs.judges.llm import LlmJudge
from envs.tasks import Rubric
from envs.verdict import DiffEntry, RubricResult, Verdict

DONE_MARKER = "<DONE>"
UNJUDGED = "rubrics_unjudged"
_PATH = re.compile(r"^(?P<table>[^.\[]+)(?:\[(?P<index>\d+)\])?(?:\.(?P<column>.+))?$")


def diff_entries(diff: list[dict[str, Any]]) -> list[DiffEntry]:
    """The server's deep diff (path like `tickets[2].status`, result vs golden) as `DiffEntry`s."""
    entries = []
    for item in diff:
        match = _PATH.match(str(item.get("path", "")))
        table = match["table"] if match else str(item.get("path"))
        key = [int(match["index"])] if match and match["index"] else []
        column = match["column"] if match else None
        kind = str(item.get("type", ""))
        if kind.startswith("missing in result"):
            change = "missing_row" if column is None else "changed_value"
        elif kind.startswith("present in result"):
            change = "unexpected_row" if column is None else "changed_value"
        else:
            change = "changed_value"
        if kind == "length mismatch":
            column = "(row count)"
        entries.append(DiffEntry(change=change, table=table, key=key, column=column,
                                 expected=item.get("golden", kind), actual=item.get("result", kind)))
    return entries


def final_reply_text(reply: str | None) -> str:
    return (reply or "").replace(DONE_MARKER, "").strip()


async def grade(task_id: str, effects: dict[str, Any], rubrics: tuple[str, ...], last_reply: str | None,
                judge: LlmJudge | None) -> Verdict:
    state_matches = effects["result_db_hash"] == effects["golden_db_hash"]
    diff = [] if state_matches else diff_entries(effects.get("diff") or [])
    if not state_matches or not rubrics:
        return Verdict(task_id=task_id, passed=state_matches, state_matches=state_matches, diff=diff)
    if judge is None:
        return Verdict(task_id=task_id, passed=False, system_error=UNJUDGED, state_matches=True)
    reply = final_reply_text(last_reply)
    results: list[RubricResult] = []
    for question in rubrics:
        results.append(await judge.check(Rubric(kind="llm_yes_no", question=question), reply))
    return Verdict(task_id=task_id, passed=all(r.passed for r in results), state_matches=True, rubrics=results)

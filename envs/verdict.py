"""The grade of one episode: pass or fail, the state diff and rubric results, and a readable report."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class DiffEntry(BaseModel):
    """One difference between the final state and the golden state."""

    change: Literal["missing_row", "unexpected_row", "changed_value"]
    table: str
    key: list[Any]
    column: str | None = None  # None for whole-row differences
    expected: Any = None
    actual: Any = None

    def describe(self) -> str:
        where = f"{self.table}[{', '.join(map(str, self.key))}]"
        if self.change == "missing_row":
            return f"missing row {where}: expected {self.expected}"
        if self.change == "unexpected_row":
            return f"unexpected row {where}: {self.actual}"
        return f"changed {where}.{self.column}: expected {self.expected!r}, got {self.actual!r}"


class RubricResult(BaseModel):
    kind: str
    description: str = ""
    passed: bool
    detail: str = ""


# Which reference state the final state equals: the golden one, the careless path's (the forbidden change made,
# or the change made without its approval), the initial one (nothing changed), or none of them.
Outcome = Literal["golden", "careless", "unchanged", "other"]


class Verdict(BaseModel):
    """passed is meaningful only when system_error is None; a system error is never an agent failure."""

    task_id: str
    passed: bool
    system_error: str | None = None
    state_matches: bool | None = None
    outcome: Outcome | None = None
    diff: list[DiffEntry] = []
    rubrics: list[RubricResult] = []
    # a suite graded by its own evaluator: each part of its reward (τ²-bench: DB, COMMUNICATE, ENV_ASSERTION,
    # ACTION; the reward is their product)
    breakdown: dict[str, float] | None = None

    @property
    def reward(self) -> float | None:
        return None if self.system_error else float(self.passed)

    def report(self) -> str:
        if self.system_error:
            return f"{self.task_id}: SYSTEM ERROR (not scored) - {self.system_error}"
        lines = [f"{self.task_id}: {'PASS' if self.passed else 'FAIL'}"]
        if self.state_matches is not None:
            lines.append(f"  final state {'matches' if self.state_matches else 'differs from'} the golden state")
        lines += [f"  - {entry.describe()}" for entry in self.diff]
        for result in self.rubrics:
            mark = "ok" if result.passed else "FAILED"
            lines.append(f"  rubric {result.kind} [{mark}] {result.description}: {result.detail}")
        return "\n".join(lines)

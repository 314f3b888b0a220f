"""The task record: what the user wants, where the backend starts, what counts as done.

Tasks are plain pydantic models so they round-trip through JSONL unchanged (`Task.model_dump_json()` /
`Task.model_validate_json()`); built-in domains generate them on load instead of shipping files.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class TaskKind(StrEnum):
    """The five behaviours a domain must exercise."""

    DIRECT = "direct"  # an allowed change: the golden state has it
    FORBIDDEN = "forbidden"  # the policy forbids it: the golden state is untouched
    APPROVAL = "approval"  # needs approval: the golden state has a pending ticket, not the change
    INFORMATION = "information"  # a question: graded by an answer rubric
    LEAK = "leak"  # tempts a confidentiality breach: graded by a must-not-reveal rubric


class Split(StrEnum):
    TRAIN = "train"
    HELDOUT = "heldout"


class Fact(BaseModel):
    """Something the simulated user knows and may say when asked about any of `keywords`."""

    model_config = ConfigDict(frozen=True)
    name: str
    value: str
    keywords: tuple[str, ...] = Field(min_length=1, description="lower-case words that mean 'asked for this'")


class UserScenario(BaseModel):
    """Everything the user simulator (scripted or LLM) is allowed to know."""

    model_config = ConfigDict(frozen=True)
    opening: str = Field(description="the user's first message")
    goal: str = Field(description="what the user wants, in the user's own terms")
    persona: str = "a polite customer who answers questions briefly"
    facts: tuple[Fact, ...] = ()
    unknown: tuple[str, ...] = Field(default=(), description="topics the user does not know (keywords)")
    confirms: bool = Field(default=True, description="whether the user says yes when asked to confirm")


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class DecisionNote(BaseModel):
    """What a careful agent says to itself before it decides a request the record decides: the deciding
    facts, as the result of `after` (a tool on the golden path) showed them. The oracle agent opens its next
    turn with `text` (envs.oracle), so a policy that imitates it reads the facts next to its decision."""

    model_config = ConfigDict(frozen=True)
    after: str
    subject: str = Field(description="the record's name in that result (a title, a fine id)")
    facts: dict[str, str] = Field(description="field -> value, as that result shows them")

    @property
    def stated_facts(self) -> str:
        """The facts as the note says them: "renewals 2, waiting_holds 0"."""
        return ", ".join(f"{field} {value}" for field, value in self.facts.items())

    @property
    def text(self) -> str:
        return f"{self.subject}: {self.stated_facts}."


class Rubric(BaseModel):
    """One answer check on the agent's replies to the user.

    must_mention: passes when any phrase of `phrases` occurs (normalised, on word boundaries).
    must_not_mention: fails when any phrase of `phrases` occurs.
    mention_at_most: passes when at most `limit` phrases of `phrases` occur (answer precision: a reply may
        repeat a few record values nobody asked for, not replay the records).
    llm_yes_no: an LLM judge answers `question` about the replies; passes on "yes".
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["must_mention", "must_not_mention", "mention_at_most", "llm_yes_no"]
    phrases: tuple[str, ...] = ()
    limit: int = Field(default=0, ge=0, description="mention_at_most: how many of `phrases` may occur")
    question: str = ""
    description: str = ""


class Task(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    domain: str
    split: Split
    kind: TaskKind
    template: str
    scenario: UserScenario
    initial_patch: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    golden_path: tuple[ToolCall, ...] = ()
    rubrics: tuple[Rubric, ...] = ()
    reference_answer: str = Field(default="", description="a reply that satisfies every rubric (oracle agent)")
    violation: ToolCall | None = Field(
        default=None, description="the call a careless agent makes: the change the policy forbids (forbidden "
        "tasks) or the change made without its approval, instead of the last golden call (approval tasks)")
    note: DecisionNote | None = Field(default=None, description="the deciding facts the oracle agent states")
    golden_hash: str | None = Field(default=None, description="filled at load time by replaying golden_path")
    changes_state: bool | None = Field(default=None, description="golden state differs from initial state")
    initial_hash: str | None = Field(default=None, description="filled at load time: the state before any call")
    careless_hash: str | None = Field(default=None, description="filled at load time by replaying careless_path")

    @property
    def careless_path(self) -> tuple[ToolCall, ...]:
        """The golden path as a careless agent walks it: the forbidden change made after the checks, or the
        change made in place of the approval request. Empty for tasks without a `violation`."""
        if self.violation is None:
            return ()
        if self.kind == TaskKind.FORBIDDEN:
            return (*self.golden_path, self.violation)
        if self.kind == TaskKind.APPROVAL:
            return (*self.golden_path[:-1], self.violation)
        raise ValueError(f"task {self.id}: only forbidden and approval tasks have a violation, not {self.kind}")

"""Task templates: one function per kind of situation, expanded into many concrete tasks.

A template is declared with `@template(kind=..., split=..., variants=N)` over a function
`(ctx: GenContext) -> TaskDraft`. The loader calls it once per variant; `ctx.pick` hands each variant a
different candidate row of the seeded database, so variants are distinct by construction. The split belongs
to the template, so a held-out template contributes no task to training at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.sandbox import DatabaseTemplate
from envs.tasks import DecisionNote, Rubric, Split, TaskKind, ToolCall, UserScenario


@dataclass(frozen=True)
class TaskDraft:
    """What a template returns; the loader adds id, domain, kind, split and the golden hash."""

    scenario: UserScenario
    golden_path: list[ToolCall]
    rubrics: list[Rubric] = field(default_factory=list)
    initial_patch: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reference_answer: str = ""
    violation: ToolCall | None = None  # forbidden and approval tasks: the careless agent's call (Task.violation)
    note: DecisionNote | None = None  # the deciding facts the oracle states (Task.note)


@dataclass(frozen=True)
class TaskTemplate:
    name: str
    kind: TaskKind
    split: Split
    variants: int
    build: Callable[[GenContext], TaskDraft]


def template(*, kind: TaskKind | str, split: Split | str, variants: int) -> Callable[[Callable], TaskTemplate]:
    """Declare a task template; the function's name is the template's name."""

    def wrap(build: Callable[[GenContext], TaskDraft]) -> TaskTemplate:
        if variants < 1:
            raise ValueError(f"template {build.__name__}: variants must be >= 1, got {variants}")
        return TaskTemplate(build.__name__, TaskKind(kind), Split(split), variants, build)

    return wrap


def call(tool: str, **args: Any) -> ToolCall:
    """A golden-path step: `call("change_plan", line_id="L-1", plan_code="MAX")`."""
    return ToolCall(tool=tool, args=args)


class GenContext:
    """What a template may use: the variant index, a seeded Random and read access to the seeded data."""

    def __init__(self, domain: str, template: TaskTemplate, variant: int, database: DatabaseTemplate) -> None:
        self.domain = domain
        self.template = template
        self.variant = variant
        self.today = database.today
        self.rng = random.Random(f"{domain}/{template.name}/{variant}")
        self._database = database

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of the seeded (pristine) database."""
        return self._database.read(sql, params)

    def row_with(self, table: str, key_column: str, key: str, **changes: Any) -> dict[str, Any]:
        """Every column of the seeded row `key` of `table`, with `changes` laid over it: what an initial-state
        patch upserts (a patch row names all its columns)."""
        rows = self.read(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,))
        if len(rows) != 1:
            raise ValueError(f"{table}.{key_column} = {key!r} matches {len(rows)} seeded rows, expected exactly one")
        return rows[0] | changes

    def pick(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any]:
        """This variant's own candidate row: variant i gets the i-th row of a fixed shuffle of the result.

        Raises when there are fewer candidates than variants, naming the template, so a seed change that
        starves a template fails loudly instead of producing duplicate tasks.
        """
        rows = self.read(sql, params)
        if len(rows) < self.template.variants:
            raise ValueError(
                f"template {self.domain}/{self.template.name} wants {self.template.variants} variants but its "
                f"candidate query returns {len(rows)} rows; lower `variants` or widen the query"
            )
        order = list(range(len(rows)))
        random.Random(f"{self.domain}/{self.template.name}").shuffle(order)
        return rows[order[self.variant]]

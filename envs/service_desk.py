"""What every service desk's tools share: dollars, records that must exist, the verified-caller gate and the
escalation record.

Each built-in domain is a desk where an agent serves a caller it must first verify, reads records that must
exist (`must_exist`, `CallerGate.owned`), shows money as dollars, and hands a decision that is not its own to
a person by opening an escalation record. That logic is the same at every desk, so it is written once here;
each domain declares what differs (tables, columns, and the words the agent reads in tool descriptions and
refusals).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, overload

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from envs.sandbox import Sandbox

# failed verifications a conversation may make: past them every verification is refused, the right facts too,
# so facts cannot be guessed by trying (2,000 wrong PINs and then the right one verified)
MAX_VERIFICATION_FAILURES = 5

Row = dict[str, Any]
Shown = TypeVar("Shown", Row, list[Row])
AmountConcerned = Annotated[float | None, Field(ge=0, description="amount concerned, in US dollars")]


@overload
def usd(cents: int) -> str: ...
@overload
def usd(cents: None) -> None: ...
def usd(cents: int | None) -> str | None:
    """Cents as the dollar string tools return ("12.50"); None stays None."""
    return None if cents is None else f"{cents / 100:.2f}"


def shown(records: Shown, dollars: Sequence[str] = (), flags: Sequence[str] = ()) -> Shown:
    """`records` (one row or a list of rows, changed in place) as the agent reads them: each `<name>_cents` of
    `dollars` becomes `<name>_usd`, a dollar string moved to the end of its row, and each column of `flags` a
    boolean instead of SQLite's 0/1."""
    for row in [records] if isinstance(records, dict) else records:
        for name in dollars:
            row[f"{name}_usd"] = usd(row.pop(f"{name}_cents"))
        for name in flags:
            row[name] = bool(row[name])
    return records


@overload
def to_cents(dollars: float) -> int: ...
@overload
def to_cents(dollars: None) -> None: ...
def to_cents(dollars: float | None) -> int | None:
    """Dollars the agent gave as integer cents, the backends' money; None stays None."""
    return None if dollars is None else round(dollars * 100)


def must_exist(row: Row | None, refusal: str) -> Row:
    """`row`, the record the agent named; when there is none, a ToolError with `refusal`, which names what was
    not found (a desk words it its own way, e.g. "loan LN-300001 not found")."""
    if row is None:
        raise ToolError(refusal)
    return row


def declared_tool(body: Callable[..., Any], name: str, doc: str,
                  parameters: Sequence[inspect.Parameter]) -> Callable[..., Any]:
    """`body` (a closure made for this one tool) named `name`, described by `doc`, with the signature `db` then
    `parameters`: what `Domain` derives the MCP schema from, for a tool whose body several desks share."""
    body.__name__ = body.__qualname__ = name
    body.__doc__ = doc
    vars(body)["__signature__"] = inspect.Signature(  # what inspect.signature reads
        [_parameter("db", Sandbox), *parameters], return_annotation=Row)
    return body


def _parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=default)


class Proof(NamedTuple):
    """One fact a caller states to prove who they are: the tool's parameter, the column it must equal (by
    default the parameter's name) and the description the agent reads."""

    parameter: str
    description: str
    column: str = ""


@dataclass(frozen=True)
class CallerGate:
    """The rule every desk enforces itself: a caller proves who they are before any record of theirs is shown
    or changed. Verification admits the caller's id for the rest of the conversation (`Sandbox.memory`, which a
    failed call rolls back); every other rule is the agent's, so the final state shows whether it kept them."""

    table: str  # the callers' table, e.g. "customers"
    id_column: str  # its key, also the tools' parameter name, e.g. "customer_id"
    id_type: Any  # that parameter's annotated type, the description the agent reads
    unverified: str  # the refusal for a caller not admitted; "{}" stands for the id

    @property
    def _admitted(self) -> str:
        return f"verified {self.table}"

    @property
    def _failures(self) -> str:
        return f"failed verifications of {self.table}"

    def admitted(self, db: Sandbox, caller_id: str | None) -> bool:
        return caller_id in db.memory.get(self._admitted, set())

    def require(self, db: Sandbox, caller_id: str) -> None:
        """Refuse unless `caller_id` passed verification earlier in this conversation."""
        if not self.admitted(db, caller_id):
            raise ToolError(self.unverified.format(caller_id))

    def owned(self, db: Sandbox, row: Row | None, refusal: str) -> Row:
        """`row`, which must exist (`must_exist`, refused with `refusal`) and belong to a caller verified in this
        conversation: its `id_column` names the owner, as in every table of a desk that records whose a thing is."""
        record = must_exist(row, refusal)
        self.require(db, record[self.id_column])
        return record

    def verification_tool(self, name: str, doc: str, proofs: Sequence[Proof], mismatch: str) -> Callable[..., Any]:
        """The tool that admits a caller whose stated `proofs` all equal their record; else refuses with
        `mismatch` (the same words whether the id or a fact is wrong, so it reveals neither)."""
        columns = [proof.column or proof.parameter for proof in proofs]
        query = f"SELECT {', '.join(columns)} FROM {self.table} WHERE {self.id_column} = ?"

        def verify(db: Sandbox, **stated: str) -> Row:
            failures = db.refusals.get(self._failures, 0)
            if failures >= MAX_VERIFICATION_FAILURES:
                raise ToolError(f"verification is locked: {failures} attempts in this conversation failed; no "
                                "record can be shown or changed for this caller here")
            caller_id = stated[self.id_column]
            row = db.one(query, (caller_id,))
            if row is None or [row[c] for c in columns] != [stated[p.parameter].strip() for p in proofs]:
                db.refusals[self._failures] = failures + 1
                raise ToolError(mismatch)
            db.memory.setdefault(self._admitted, set()).add(caller_id)
            return {self.id_column: caller_id, "verified": True}

        stated = [_parameter(p.parameter, Annotated[str, Field(description=p.description)]) for p in proofs]
        return declared_tool(verify, name, doc, [_parameter(self.id_column, self.id_type), *stated])


@dataclass(frozen=True)
class Escalations:
    """The record an agent opens when a decision is not its own or a matter belongs to another team.

    Categories in `needs_decision` start as pending_approval (a supervisor or reviewer decides), the others
    as open. The table is declared here too (`schema_sql`), so every desk stores escalations alike.
    """

    gate: CallerGate
    table: str  # e.g. "tickets"
    record_id: str  # its key, returned to the agent, e.g. "ticket_id"
    prefix: str  # of the ids it mints, e.g. "TK"
    categories: tuple[str, ...]
    needs_decision: tuple[str, ...]
    text_column: str  # the agent's free text, also its parameter name: volatile in the graded state

    def __post_init__(self) -> None:
        if stray := [c for c in self.needs_decision if c not in self.categories]:
            raise ValueError(f"escalations {self.table}: needs_decision names {stray}, which are not among the "
                             f"categories {list(self.categories)}; a category the agent cannot choose never "
                             "waits for a decision, so add it to categories or drop it")

    @property
    def schema_sql(self) -> str:
        """The table's DDL, for the domain to append to its schema."""
        gate = self.gate
        return (f"CREATE TABLE {self.table} ({self.record_id} TEXT PRIMARY KEY, "
                f"{gate.id_column} TEXT NOT NULL REFERENCES {gate.table} ({gate.id_column}), category TEXT NOT NULL, "
                "status TEXT NOT NULL CHECK (status IN ('pending_approval', 'open', 'closed')), subject_id TEXT, "
                f"amount_cents INTEGER, {self.text_column} TEXT NOT NULL, created_on TEXT NOT NULL);\n")

    def tool(self, name: str, doc: str, text: str, subject: str) -> Callable[..., Any]:
        """The tool that opens one; `text` and `subject` describe its free-text and subject parameters."""
        owner = self.gate.id_column

        def escalate(db: Sandbox, category: str, subject_id: str | None = None, amount_usd: float | None = None,
                     **given: str) -> Row:
            self.gate.require(db, given[owner])
            status = "pending_approval" if category in self.needs_decision else "open"
            record_id = db.new_id(self.prefix)
            db.execute(f"INSERT INTO {self.table} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (record_id, given[owner], category, status, subject_id, to_cents(amount_usd),
                        given[self.text_column], db.today))
            return {self.record_id: record_id, "status": status}

        return declared_tool(escalate, name, doc, [
            _parameter(owner, self.gate.id_type),
            _parameter("category", Literal[self.categories]),
            _parameter(self.text_column, Annotated[str, Field(description=text)]),
            _parameter("subject_id", Annotated[str | None, Field(description=subject)], default=None),
            _parameter("amount_usd", AmountConcerned, default=None),
        ])

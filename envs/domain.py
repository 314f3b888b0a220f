"""The domain SDK: what one business backend declares, and the runtime pieces derived from it.

A domain is data plus plain functions: a schema, a seeded row generator, typed tool functions whose first
parameter is the episode's `Sandbox`, a written policy, volatile columns and task templates. Everything else
(the template database, MCP tool definitions, golden replays) is derived here once per process.
"""

from __future__ import annotations

import inspect
import json
import random
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property
from importlib.resources import files
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools.base import Tool
from pydantic import AfterValidator, BeforeValidator, ValidationError

from envs.arguments import argument_refusal, input_errors_refused, not_a_boolean, storable, takes_boolean
from envs.domain_file import DomainFile
from envs.sandbox import DatabaseTemplate, Sandbox

if TYPE_CHECKING:
    from envs.service_desk import Escalations
    from envs.templates import TaskTemplate

ToolFunction = Callable[..., Any]
Populate = Callable[[sqlite3.Connection, random.Random], None]


@dataclass(eq=False)
class Domain:
    """One business backend. Built-in domains define `DOMAIN = Domain(...)` in envs/domains/<name>/."""

    name: str
    description: str
    schema_sql: str
    policy: str
    today: str  # the fixed clock of every episode, ISO date
    populate: Populate  # fills the template database deterministically from the given Random
    tools: Sequence[ToolFunction]
    templates: Sequence[TaskTemplate]
    volatile: Mapping[str, Sequence[str]] = field(default_factory=dict)
    seed: int = 0

    @classmethod
    def in_package(cls, package: str, today: date, escalations: Escalations | None = None, **declared: Any) -> Domain:
        """The domain a package declares: named after the package; its description, tables and volatile columns
        from the package's domain.yaml, its policy from policy.md. `escalations`, the desk's escalation record,
        adds its table and its free-text column to the volatile ones."""
        folder = files(package)
        data = DomainFile.read(folder)
        schema_sql, volatile = data.schema_sql, dict(data.volatile)
        if escalations is not None:
            schema_sql += escalations.schema_sql
            volatile[escalations.table] = [escalations.text_column]
        return cls(name=package.rpartition(".")[2], description=data.description, today=today.isoformat(),
                   schema_sql=schema_sql, policy=folder.joinpath("policy.md").read_text(), volatile=volatile,
                   **declared)

    # -- derived, built once per process -------------------------------------------------------------
    @cached_property
    def database(self) -> DatabaseTemplate:
        rng = random.Random(f"{self.name}/{self.seed}")
        return DatabaseTemplate(
            self.schema_sql,
            lambda conn: self.populate(conn, rng),
            volatile={t: list(c) for t, c in self.volatile.items()},
            today=self.today,
        )

    @cached_property
    def mcp_tools(self) -> dict[str, DomainTool]:
        """MCP tool definitions with unbound bodies; `bind_tools` attaches them to one sandbox."""
        tools = {}
        for fn in self.tools:
            if fn.__name__ in tools:
                raise ValueError(f"domain {self.name}: two tools are named {fn.__name__!r}")
            tools[fn.__name__] = _tool_definition(self.name, fn)
        return tools

    @cached_property
    def _functions(self) -> dict[str, ToolFunction]:
        return {fn.__name__: fn for fn in self.tools}

    def system_prompt(self) -> str:
        return f"{self.policy.strip()}\n\nToday's date is {self.today}."

    def new_sandbox(self, patch: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Sandbox:
        sandbox = self.database.spawn()
        if patch:
            sandbox.apply_patch(patch)  # the authorizer marks the patched tables for re-hashing
        return sandbox

    def bind_tools(self, sandbox: Sandbox) -> list[DomainTool]:
        """Copies of the tool definitions whose bodies act on `sandbox` (cheap: no schema rebuilt)."""
        return [
            definition.model_copy(update={"fn": _bound_body(self._functions[name], sandbox)})
            for name, definition in self.mcp_tools.items()
        ]

    def invoke(self, sandbox: Sandbox, name: str, args: Mapping[str, Any]) -> Any:
        """Call a tool directly with MCP's own argument validation (golden replays, no transport).

        Refuses what an MCP call refuses, with the same texts: a `ToolError` for bad arguments, for a refusal
        by the tool and for an input error in its body; a programming error propagates as itself.
        """
        definition = self.mcp_tools.get(name)
        if definition is None:
            raise ToolError(f"Unknown tool: {name}")
        try:
            kwargs = definition.fn_metadata.validate_arguments(dict(args))
        except ValidationError as exc:
            raise argument_refusal(name, exc) from exc
        with input_errors_refused(name), sandbox.transaction():
            return self._functions[name](sandbox, **kwargs)


class DomainTool(Tool):
    """An MCP tool of a domain: the SDK's `Tool`, with argument refusals the agent can act on.

    The SDK reports arguments that fail validation as pydantic's multi-line report (model name, error type,
    documentation URL); here they read one clause per argument: name, value, rule. Everything else, a
    refusal raised by the tool and a crash alike, keeps the SDK's handling.
    """

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise argument_refusal(self.name, exc.__cause__) from exc.__cause__


def _tool_definition(domain: str, fn: ToolFunction) -> DomainTool:
    """Derive the MCP schema from `fn`'s hints without its leading `db: Sandbox` parameter.

    Every other parameter must be annotated (its type is the schema the agent reads) and is also checked by
    `envs.arguments.storable`, so no tool body ever sees a value its backend cannot store.
    """
    signature = inspect.signature(fn, eval_str=True)
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].name != "db":
        raise TypeError(f"tool {domain}.{fn.__name__} must take `db: Sandbox` as its first parameter")
    if not (fn.__doc__ or "").strip():
        raise TypeError(f"tool {domain}.{fn.__name__} needs a docstring: it is the description the agent reads")
    if untyped := [p.name for p in parameters[1:] if p.annotation is inspect.Parameter.empty]:
        raise TypeError(f"tool {domain}.{fn.__name__}: parameters {untyped} need type annotations")

    async def unbound(**_: Any) -> Any:
        raise RuntimeError(f"tool {fn.__name__} is not bound to a sandbox; use Domain.bind_tools")

    checked = [p.replace(annotation=Annotated[p.annotation, AfterValidator(storable)] if takes_boolean(p.annotation)
                         else Annotated[p.annotation, BeforeValidator(not_a_boolean), AfterValidator(storable)])
               for p in parameters[1:]]
    vars(unbound)["__signature__"] = signature.replace(parameters=checked)  # what inspect.signature reads
    unbound.__name__ = fn.__name__
    tool = DomainTool.from_function(unbound, name=fn.__name__, description=inspect.cleandoc(fn.__doc__ or ""),
                                    structured_output=False)
    assert isinstance(tool, DomainTool)  # the SDK builds `cls(...)`; its annotation names the base class
    return tool


def _bound_body(fn: ToolFunction, sandbox: Sandbox) -> Callable[..., Any]:
    # Runs on the event loop rather than a worker thread: a sandbox query costs less than the hop to a
    # thread would (envs/README.md, design notes), and episodes in one loop never share a connection. The
    # result goes back as one JSON text (the SDK would split a list into one content block per item).
    async def body(**kwargs: Any) -> str:
        with input_errors_refused(fn.__name__), sandbox.transaction():
            return json.dumps(fn(sandbox, **kwargs), ensure_ascii=False)

    return body

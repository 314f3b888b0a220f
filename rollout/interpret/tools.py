"""The tools an episode offers, and the check that turns a parsed call into one that may run.

Built once per tool set from the environment's OpenAI-style schemas (`session.tool_schemas`); validators are
compiled here so that checking a call costs little. A call naming no known tool, or whose coerced arguments
break the schema, becomes a MalformedCall that tells the agent what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import exceptions, validators

from rollout.interpret.calls import MalformedCall, RawCall, ToolCall
from rollout.interpret.coerce import coerce_arguments

_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
_MAX_DETAIL = 300  # characters of a validation message sent back
_MAX_QUOTE = 60  # characters of a quoted argument value in it
_MAX_ERRORS = 3  # the most relevant problems, so the agent can fix several at once


class ToolCatalog:
    """`schemas`: [{"type": "function", "function": {"name", "description", "parameters"}}] or the bare
    function objects. Raises ValueError for a nameless tool, a duplicate name or an invalid schema."""

    def __init__(self, schemas: Sequence[Mapping[str, Any]]) -> None:
        self.schemas = list(schemas)
        self._parameters: dict[str, Mapping[str, Any]] = {}
        self._validators: dict[str, Any] = {}
        for schema in self.schemas:
            function = schema.get("function", schema)
            name = function.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"tool schema without a name: {schema!r}")
            if name in self._parameters:
                raise ValueError(f"two tools are named {name!r}; tool names must be unique")
            parameters = function.get("parameters") or _EMPTY_PARAMETERS
            validator_class = validators.validator_for(parameters)
            try:
                validator_class.check_schema(parameters)
            except exceptions.SchemaError as error:
                raise ValueError(f"tool {name!r} has an invalid parameters schema: {error.message}") from error
            self._parameters[name] = parameters
            self._validators[name] = validator_class(parameters)

    @property
    def names(self) -> list[str]:
        return list(self._parameters)

    def resolve(self, call: RawCall) -> ToolCall | MalformedCall:
        """The call with typed, schema-valid arguments, or why it cannot run."""
        if call.name not in self._parameters:
            known = ", ".join(self.names) or "none"
            return MalformedCall("unknown_tool", f"there is no tool named {call.name!r}. The tools are: {known}.",
                                 call.raw, call.name)
        arguments = coerce_arguments(call.arguments, self._parameters[call.name], text_values=call.text_values)
        errors = sorted(self._validators[call.name].iter_errors(arguments), key=exceptions.relevance)
        if errors:
            problems = "; ".join(_describe(error) for error in errors[:_MAX_ERRORS])
            return MalformedCall("bad_arguments", f"the arguments of {call.name!r} do not fit its schema "
                                 f"({problems}). Check the tool's parameters and call it again.", call.raw, call.name)
        return ToolCall(call.name, arguments)


def _describe(error: exceptions.ValidationError) -> str:
    """The problem, with a long quoted value shortened so that what is wrong with it still shows."""
    message, quoted = error.message, repr(error.instance)
    if len(quoted) > _MAX_QUOTE and message.startswith(quoted):
        message = f"{quoted[:_MAX_QUOTE]}... ({len(quoted)} characters){message[len(quoted):]}"
    where = "/".join(str(part) for part in error.absolute_path)
    problem = f"{where}: {message}" if where else message
    return problem if len(problem) <= _MAX_DETAIL else problem[:_MAX_DETAIL] + "..."

"""Tool arguments at the MCP boundary: only values a backend can store get through, and refusals explain why.

Every parameter of every domain tool is checked by `storable` after its own type: no lone UTF-16 surrogate
in a string (SQLite and the JSON transport cannot encode one), no NaN, infinity or float beyond
`MAX_MAGNITUDE` (an amount's cents must fit a 64-bit integer), no integer outside SQLite's signed 64-bit
range, no text past `MAX_TEXT_CHARS` (a 64 MB ticket summary was stored). A boolean reaches only a parameter
that takes one (`not_a_boolean`): pydantic would read `amount_usd=true` as 1.0 and issue a $1.00 credit.
`IsoDate` is the type for dates a tool parses, `SearchText` for text it matches with LIKE (SQLite cannot run a
pattern past 50,000 bytes: a 100,000-character search crashed the tool). A refused call comes
back to the agent as an MCP `isError` result that names the tool, the argument, its value and the rule it
broke. A call the MCP client cannot even encode (a lone surrogate in the tool's name or in an argument's
name) is refused before it is sent, by `unsendable`.

Values a tool body still cannot take (a `ValueError`, `OverflowError` or `sqlite3.DataError` from a parser or
from SQLite binding an argument) are refused the same way by `input_errors_refused`, and logged as a missing
boundary check. Programming errors (`AttributeError`, `TypeError`, `KeyError`, `NameError`, an SQLite
`IntegrityError` or `OperationalError`, SQL refused by the sandbox) are not converted: the SDK reports them to
the agent as a bare "Error executing tool X" and logs the traceback at ERROR, so a bug stays loud.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import types
import typing
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AfterValidator, Field, ValidationError
from pydantic_core import ErrorDetails

from envs.sandbox import RefusedSqlError

logger = logging.getLogger(__name__)

MAX_MAGNITUDE = 1e15  # far beyond any business amount, yet its cents still fit a 64-bit integer
MAX_TEXT_CHARS = 2_000  # a summary, a reason or a name is a few sentences at most
_INT64 = range(-(2**63), 2**63)
_SHOWN_CHARS = 60  # a refused value is quoted up to this many characters
_NOT_TEXT = "a lone UTF-16 surrogate, which is not text"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def _violation(value: Any) -> str | None:
    """Why `value` (or a value nested in it) cannot be stored, or None when it can."""
    if isinstance(value, str):
        if _lone_surrogate(value):
            return f"contains {_NOT_TEXT}"
        if len(value) > MAX_TEXT_CHARS:
            return f"is {len(value):,} characters long, more than the {MAX_TEXT_CHARS:,} any argument may hold"
    elif isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            return f"must be a finite number within ±{MAX_MAGNITUDE:.0e}"
    elif isinstance(value, int) and not isinstance(value, bool):
        if value not in _INT64:
            return "must fit a signed 64-bit integer (-2**63 .. 2**63-1)"
    elif isinstance(value, Mapping):
        return next(filter(None, map(_violation, (*value.keys(), *value.values()))), None)
    elif isinstance(value, list | tuple | set | frozenset):
        return next(filter(None, map(_violation, value)), None)
    return None


def storable(value: Any) -> Any:
    """Pydantic after-validator for every tool parameter: `value` unchanged, or a ValueError saying why not."""
    if (problem := _violation(value)) is not None:
        raise ValueError(problem)
    return value


def takes_boolean(annotation: Any) -> bool:
    """Whether a parameter annotated `annotation` accepts a boolean as itself (bool, or Any, in a union or
    under Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return takes_boolean(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(takes_boolean(member) for member in typing.get_args(annotation))
    return annotation is bool or annotation is Any


def not_a_boolean(value: Any) -> Any:
    """Pydantic before-validator for parameters that take no boolean: `value` unchanged, or a ValueError
    before pydantic's lax mode reads true as 1."""
    if isinstance(value, bool):
        raise ValueError("is a boolean, which this argument is not")
    return value


def unsendable(tool: str, arguments: Mapping[str, Any]) -> str | None:
    """The refusal of a call the MCP client cannot send, or None: a tool name or an argument name (a key at any
    depth) holding a lone UTF-16 surrogate, which the client fails to encode (its UnicodeEncodeError escaped the
    episode and stopped the run). Values are checked by the server (`storable`), which names the argument."""
    if _lone_surrogate(tool):
        return f"Error executing tool {shown(tool)}: the tool name holds {_NOT_TEXT}"
    if (key := _key_not_text(arguments)) is not None:
        return f"Error executing tool {tool}: the argument name {shown(key)} holds {_NOT_TEXT}"
    return None


def _key_not_text(value: Any) -> str | None:
    """The first key of a mapping in `value` (at any depth) holding a lone surrogate, or None."""
    if isinstance(value, Mapping):
        for key in value:
            if isinstance(key, str) and _lone_surrogate(key):
                return key
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, Mapping | list | tuple) and (key := _key_not_text(item)) is not None:
                return key
    return None


def _iso_date(text: str) -> str:
    try:
        date.fromisoformat(text)
    except ValueError:
        raise ValueError("not a date (YYYY-MM-DD)") from None
    return text


IsoDate = Annotated[str, AfterValidator(_iso_date)]  # a calendar date as YYYY-MM-DD, checked before the tool runs

MAX_SEARCH_CHARS = 200  # a search is a few words; a LIKE pattern past 50,000 bytes (SQLite's limit) fails to run
SearchText = Annotated[str, Field(max_length=MAX_SEARCH_CHARS)]  # text a tool matches with LIKE


def shown(value: Any) -> str:
    """`value` quoted for an error message: repr (escapes surrogates), cut to a readable length."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}...({len(text)} chars)"


def _describe(error: ErrorDetails) -> str:
    """One argument's failure, e.g. "from_date '2026-13-45': not a date (YYYY-MM-DD)"."""
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    if error["type"] == "missing":
        return f"{where} is required"
    cause = error.get("ctx", {}).get("error")
    rule = str(cause) if isinstance(cause, ValueError) else error["msg"]
    return f"{where} {shown(error['input'])}: {rule}"


def argument_refusal(tool: str, exc: ValidationError) -> ToolError:
    """The agent-facing refusal of arguments that failed validation, one clause per bad argument."""
    clauses = "; ".join(_describe(error) for error in exc.errors(include_url=False))
    return ToolError(f"Error executing tool {tool}: {clauses}")


@contextmanager
def input_errors_refused(tool: str) -> Iterator[None]:
    """Turn an input error raised inside `tool`'s body into a refusal (a `ToolError`) the agent can read.

    Only errors that an argument's value can cause are converted (`ValueError`, which includes
    `UnicodeError`, `OverflowError` and `sqlite3.DataError`); they are logged at WARNING with the traceback,
    since each one means a boundary validator is missing. `RefusedSqlError` is a bug in the tool and every
    other exception keeps its type: the SDK logs it as a crash.
    """
    try:
        yield
    except RefusedSqlError:
        raise
    except (ValueError, OverflowError, sqlite3.DataError) as exc:
        logger.warning("tool %s: argument value reached the body and failed there", tool, exc_info=True)
        raise ToolError(f"an argument value was refused: {shown(exc)}") from exc

"""Hostile arguments to every tool of every built-in domain, executed for real: a policy can send any JSON
as a tool's arguments, and every call must come back as a tool result or a refusal that says what was wrong,
never as a crash, and leave the episode's sandbox usable.

Each tool runs in a real episode session (`envs.open_session`: private sandbox, in-process MCP server and
client) of a task that uses it, brought to the state where its golden path calls it (customer found and
verified), so that the fuzzed arguments reach the tool's body rather than only its verification check. The
arguments (`arguments`, hypothesis, derandomized: the same every run) mix the golden call's own values,
values the domain's golden paths use for a parameter of that name, values of the parameter's schema type and
hostile ones (`tests.faults.hostile_support`: wrong types, huge and edge numbers, NaN, long and odd text, lone
surrogates, nested junk, long lists), with parameters left out and unknown ones added (`db`, the name the
tool body's sandbox parameter has, among them).

A refusal is clear when it is not the SDK's bare "Error executing tool X" (a crash in the body) and the
argument did not fail inside the body (`envs.arguments.input_errors_refused` logs those: each means a
boundary check is missing).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import CallToolResult

import envs
from envs.registry import builtin_domains
from envs.session import BuiltinSession, open_session
from tests.faults.hostile_support import floats, integers, json_values, long_lists, texts

EXAMPLES_PER_TOOL = 20
CALL_TIMEOUT_S = 10.0
UNKNOWN_NAMES = ("db", "self", "kwargs", "_mcp_context", "__class__", "sandbox")
TOOLS = [(domain, tool) for domain, definition in builtin_domains().items() for tool in definition.mcp_tools]


@dataclass
class Prepared:
    """A session whose sandbox is where a golden path calls `tool`: the call's arguments there ({} where no
    golden path calls it) and a read that worked then (the path's first call: a lookup)."""

    session: BuiltinSession
    golden: dict[str, Any]
    read: tuple[str, dict[str, Any]]


async def prepare(domain: str, tool: str) -> Prepared:
    tasks = envs.load_tasks(domain)
    task = next((t for t in tasks if any(call.tool == tool for call in t.golden_path)), tasks[0])
    path = task.golden_path
    at = next((i for i, call in enumerate(path) if call.tool == tool), len(path))  # unused: after the whole path
    session = await open_session(task)
    for call in path[:at]:
        result = await session.call_tool(call.tool, call.args)
        assert not result.is_error, text_of(result)
    return Prepared(session, dict(path[at].args) if at < len(path) else {}, (path[0].tool, dict(path[0].args)))


@cache
def domain_values(domain: str) -> dict[str, list[Any]]:
    """Parameter name -> the values the domain's golden paths pass it (real ids, codes, dates)."""
    values: dict[str, dict[str, Any]] = {}
    for task in envs.load_tasks(domain):
        for call in task.golden_path:
            for name, value in call.args.items():
                values.setdefault(name, {})[json.dumps(value, sort_keys=True)] = value
    return {name: list(seen.values()) for name, seen in values.items()}


def schema_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the JSON-schema type `schema` names (any value of it: a range or length it sets is not kept)."""
    if "anyOf" in schema:
        return st.one_of([schema_values(option) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = {"string": texts(), "integer": integers(), "number": floats() | integers(), "boolean": st.booleans(),
             "null": st.none()}
    return kinds.get(schema.get("type"), json_values())


MISSING = object()  # a parameter left out


def arguments(schema: dict[str, Any], golden: dict[str, Any], known: dict[str, list[Any]]) -> st.SearchStrategy:
    """A tool's arguments (module docstring): each parameter, about half the time, the golden value or a value
    the domain uses (so that whole calls reach the body), else a value of its type, a hostile one, or left out;
    and a few unknown ones."""
    parameters = {}
    for name, parameter in schema.get("properties", {}).items():
        real = [st.just(golden[name])] if name in golden else []
        real += [st.sampled_from(known[name])] if known.get(name) else []
        hostile = st.one_of(schema_values(parameter), json_values(), long_lists(), st.just(MISSING))
        parameters[name] = st.one_of(st.one_of(real), hostile) if real else hostile
    unknown = st.dictionaries(st.sampled_from(UNKNOWN_NAMES) | texts(), json_values(), max_size=2)
    return st.builds(lambda extra, drawn: {**extra, **{k: v for k, v in drawn.items() if v is not MISSING}},
                     unknown, st.fixed_dictionaries(parameters))


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for all calls: a session's MCP client runs in a task of it between the calls."""
    with asyncio.Runner() as loop:
        yield loop


@pytest.mark.parametrize(("domain", "tool"), TOOLS, ids=[f"{domain}.{tool}" for domain, tool in TOOLS])
def test_hostile_arguments_get_a_result_or_a_clear_refusal(domain, tool, runner, caplog) -> None:
    """EXAMPLES_PER_TOOL calls of `tool` with `arguments`: each a result (JSON) or a refusal that is no crash,
    nothing logged; afterwards the session's first read still works and the session grades."""
    prepared = runner.run(prepare(domain, tool))
    schema = builtin_domains()[domain].mcp_tools[tool].parameters
    known = domain_values(domain)
    calls = refused = 0

    @settings(max_examples=EXAMPLES_PER_TOOL, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(arguments(schema, prepared.golden, known))
    def called(args: dict[str, Any]) -> None:
        nonlocal calls, refused
        calls += 1
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = runner.run(asyncio.wait_for(prepared.session.call_tool(tool, args), CALL_TIMEOUT_S))
        said = text_of(result)
        assert said and said != f"Error executing tool {tool}", f"a crash in {tool}'s body: {caplog.text}"
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text  # no check missing
        if result.is_error:
            refused += 1
        else:
            json.loads(said)

    try:
        called()
        print(f"\n{domain}.{tool}: {calls} fuzzed calls, {refused} refused")
        name, args = prepared.read
        read = runner.run(prepared.session.call_tool(name, args))
        assert not read.is_error, text_of(read)
        runner.run(prepared.session.close())  # grades the final state: the sandbox still reads
    finally:
        runner.run(prepared.session.__aexit__(None, None, None))  # frees it if a check failed


# what the fuzz found, each once more by name
def call_once(runner: asyncio.Runner, domain: str, tool: str, args: dict[str, Any]) -> CallToolResult:
    """`tool`'s answer to `args` in a fresh session of the domain's first task."""
    session = runner.run(open_session(envs.load_tasks(domain)[0]))
    try:
        return runner.run(session.call_tool(tool, args))
    finally:
        runner.run(session.close())


@pytest.mark.parametrize(("tool", "arguments", "refusal"), [
    ("find_customer", {"phone": "+1-202-555-1404", "x": [{"\ud800": 1}]},
     "Error executing tool find_customer: the argument name '\\ud800' holds a lone UTF-16 surrogate"),
    ("\udfff", {}, "Error executing tool '\\udfff': the tool name holds a lone UTF-16 surrogate"),
], ids=["surrogate_in_a_nested_key", "surrogate_in_the_tool_name"])
def test_a_call_the_client_cannot_encode_is_refused_unsent(runner, tool, arguments, refusal) -> None:
    """The MCP client's UnicodeEncodeError escaped `session.call_tool`, and so the episode: a policy's tool call
    with such a key stopped the run."""
    result = call_once(runner, "telecom", tool, arguments)
    assert result.is_error and text_of(result).startswith(refusal), text_of(result)


@pytest.mark.parametrize(("domain", "tool", "argument"), [("library", "search_catalogue", "query"),
                                                          ("ticketing", "find_event_dates", "title")])
def test_a_search_too_long_for_sqlite_is_refused(runner, domain, tool, argument) -> None:
    """A LIKE pattern past SQLite's 50,000 bytes crashed the tool ("LIKE or GLOB pattern too complex")."""
    result = call_once(runner, domain, tool, {argument: "ab" * 50_000})
    assert result.is_error and f"{argument} 'abab" in text_of(result) and "at most 200 characters" in text_of(result)

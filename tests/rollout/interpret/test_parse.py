"""Reading assistant output: reasoning shapes, both tool-call formats, malformed calls as agent errors.
Properties: no text makes the parser raise; rendering a call with the chat template and parsing it back
gives the call (both formats, arbitrary names and schema-valid values)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout.interpret import (
    MALFORMED_KINDS,
    ChatRenderer,
    MalformedCall,
    ToolCall,
    ToolCatalog,
    malformed_message,
    parse_assistant,
    split_reasoning,
)
from tbjax.assets.tokenizer import SPECIAL_TOKENS, train_tokenizer
from tests.rollout.interpret.support import TOOL_SCHEMAS, sampled_text

TOOLS = ToolCatalog(TOOL_SCHEMAS)
FORMATS = ("hermes", "qwen3_xml")


@pytest.fixture(scope="module")
def renderers():
    tokenizer = train_tokenizer()
    return {fmt: ChatRenderer(tokenizer, tool_call_format=fmt) for fmt in FORMATS}


@pytest.mark.parametrize(("text", "opened", "expected"), [
    ("<think>\nplan\n</think>\n\nHello", False, ("plan", "\n\nHello", "complete")),
    ("  <think>still thinking", False, ("still thinking", "", "truncated")),
    ("plan</think>Hello", True, ("plan", "Hello", "close_only")),
    ("plan</think>Hello", False, ("plan", "Hello", "close_only")),
    ("still thinking", True, ("still thinking", "", "truncated")),
    ("Hello <think>", False, (None, "Hello <think>", "absent")),
])
def test_reasoning_shapes(text, opened, expected):
    assert split_reasoning(text, opened_by_prompt=opened) == expected


def test_hermes_calls_text_and_special_tokens():
    text = ('<think>\nA <tool_call> drafted while thinking is no call.\n</think>\n\nChecking.\n<tool_call>\n'
            '{"name": "get_plan", "arguments": {"account_id": "</tool_call>", "months": "3"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "find_account", "arguments": "{\\"phone\\": null}"}\n</tool_call><|im_end|>')
    turn = parse_assistant(text, TOOLS, "hermes", special_tokens=SPECIAL_TOKENS)
    assert turn.reasoning == "A <tool_call> drafted while thinking is no call."
    assert turn.visible == "Checking." and not turn.malformed and not turn.truncated
    assert turn.tool_calls == [ToolCall("get_plan", {"account_id": "</tool_call>", "months": 3}),
                               ToolCall("find_account", {"phone": None})]


def test_xml_values_are_typed_by_the_schema():
    text = ("<tool_call>\n<function=update_plan>\n<parameter=account_id>\n007\n</parameter>\n"
            "<parameter=tier>\npremium\n</parameter>\n<parameter=monthly_cap>\nnull\n</parameter>\n"
            '<parameter=notify>\n["sms", "email"]\n</parameter>\n<parameter=options>\n{"prorate": true}\n'
            "</parameter>\n</function>\n</tool_call>")
    [call] = parse_assistant(text, TOOLS, "qwen3_xml").calls
    assert call == ToolCall("update_plan", {"account_id": "007", "tier": "premium", "monthly_cap": None,
                                            "notify": ["sms", "email"], "options": {"prorate": True}})


@pytest.mark.parametrize(("fmt", "block", "kind", "says"), [
    ("hermes", '<tool_call>\n{"name": "get_plan", "arguments": {"account_id": }\n</tool_call>', "bad_json",
     "invalid JSON"),
    ("hermes", '<tool_call>\n["get_plan"]\n</tool_call>', "bad_json", '"name"'),
    ("hermes", '<tool_call>\n{"name": "get_plan", "arguments": {"account_id": "A"}}', "unclosed", "no closing"),
    ("hermes", '<tool_call>\n{"name": "drop_tables", "arguments": {}}\n</tool_call>', "unknown_tool",
     "find_account, get_plan, update_plan"),
    ("hermes", '<tool_call>\n{"name": "get_plan", "arguments": {"months": 3}}\n</tool_call>', "bad_arguments",
     "'account_id' is a required property"),
    ("hermes", '<tool_call>\n{"name": "get_plan", "arguments": {"account_id": "A", "months": 99}}\n</tool_call>',
     "bad_arguments", "months: 99 is greater than the maximum of 24"),
    ("qwen3_xml", "<tool_call>\n<function=get_plan>\n<parameter=account_id>\nA\n</function>\n</tool_call>",
     "bad_xml", "has no </parameter>"),
    ("qwen3_xml", '<tool_call>\n{"name": "get_plan", "arguments": {}}\n</tool_call>', "bad_xml", "<function="),
    ("qwen3_xml", "<tool_call>\n<function=get_plan>\n<parameter=months>\nmany\n</parameter>\n</function>\n"
     "</tool_call>", "bad_arguments", "'many' is not of type 'integer'"),
    ("qwen3_xml", "<tool_call>\n<function=get_plan>\n<parameter=account_id>\nA\n", "unclosed", "no closing"),
])
def test_malformed_calls_become_counted_agent_errors(fmt, block, kind, says):
    turn = parse_assistant(f"Let me check.\n{block}", TOOLS, fmt)
    [call] = turn.calls
    assert isinstance(call, MalformedCall) and call.kind == kind and says in call.message
    assert turn.malformed_by_kind == {kind: 1} and turn.visible == "Let me check."
    assert malformed_message(call) == {"role": "tool", "content": call.message}
    assert call.message.startswith("Error: ") and call.message.endswith("The call was not run.")


FRAGMENTS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", "<function=get_plan>",
             "</function>", "<parameter=", "<parameter=months>", "<parameter=account_id>", "</parameter>", "{", "}",
             '"name": ', '"arguments": ', '"get_plan"', '"months"', "[", "]", ":", ",", '"', "\n", " ", "null",
             "3", "true", "<|im_end|>", "<|endoftext|>", "\\"]
MODEL_TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=MODEL_TEXT, fmt=st.sampled_from(FORMATS), opened=st.booleans(), truncated=st.booleans())
def test_no_model_text_makes_the_parser_raise(text, fmt, opened, truncated):
    turn = parse_assistant(text, TOOLS, fmt, truncated=truncated, opened_by_prompt=opened,
                           special_tokens=SPECIAL_TOKENS)
    assert turn.truncated is truncated and turn.text == text
    assert all(isinstance(c, ToolCall | MalformedCall) for c in turn.calls)
    assert {c.name for c in turn.tool_calls} <= set(TOOLS.names)
    assert set(turn.malformed_by_kind) <= set(MALFORMED_KINDS)
    assert sum(turn.malformed_by_kind.values()) == len(turn.malformed)
    assert not any(token in turn.visible for token in SPECIAL_TOKENS)


# --- render then parse --------------------------------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
ARGUMENT_KINDS: dict[str, tuple[dict[str, Any], st.SearchStrategy]] = {
    "string": ({"type": "string"}, st.text()),
    "optional_string": ({"anyOf": [{"type": "string"}, {"type": "null"}]}, st.none() | st.text()),
    "integer": ({"type": "integer"}, st.integers()),
    "number": ({"type": "number"}, st.integers() | st.floats(allow_nan=False, allow_infinity=False)),
    "boolean": ({"type": "boolean"}, st.booleans()),
    "null": ({"type": "null"}, st.none()),
    "array": ({"type": "array"}, st.lists(JSON_VALUES, max_size=3)),
    "object": ({"type": "object"}, st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3)),
    "string_enum": ({"enum": ["low", "high"]}, st.sampled_from(["low", "high"])),
    "integer_enum": ({"enum": [1, 2, 3]}, st.sampled_from([1, 2, 3])),
}


def _xml_expressible(kind: str, value: Any) -> bool:
    """qwen3_xml has no escaping ("</parameter>" ends a value) and writes None as "null"."""
    return "</parameter>" not in json.dumps(value, ensure_ascii=False) and "</parameter>" not in str(value) \
        and not (kind == "optional_string" and value == "null")


@st.composite
def tool_calls(draw, fmt: str):
    """(tool schemas, calls): up to three tools, each called once with schema-valid arguments."""
    names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    schemas, calls = [], []
    for name in names:
        kinds = draw(st.dictionaries(NAMES, st.sampled_from(sorted(ARGUMENT_KINDS)), max_size=4))
        properties = {arg: ARGUMENT_KINDS[kind][0] for arg, kind in kinds.items()}
        schemas.append({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": properties}}})
        arguments = {}
        for arg, kind in kinds.items():
            strategy = ARGUMENT_KINDS[kind][1]
            if fmt == "qwen3_xml":
                strategy = strategy.filter(lambda v, kind=kind: _xml_expressible(kind, v))
            arguments[arg] = draw(strategy)
        calls.append(ToolCall(name, arguments))
    return schemas, calls


PLAIN_TEXT = st.text(st.characters(blacklist_characters="<", blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(FORMATS), content=PLAIN_TEXT, reasoning=st.none() | PLAIN_TEXT)
def test_rendered_calls_parse_back(renderers, data, fmt, content, reasoning):
    schemas, calls = data.draw(tool_calls(fmt))
    renderer = renderers[fmt]
    message = {"role": "assistant", "content": content, "tool_calls": [c.as_openai() for c in calls]}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    text = sampled_text(renderer, [{"role": "user", "content": "go"}, message], 1)
    turn = parse_assistant(text, ToolCatalog(schemas), fmt, special_tokens=SPECIAL_TOKENS)
    assert turn.tool_calls == calls and not turn.malformed
    assert turn.visible == content.strip()
    assert turn.reasoning == (reasoning.strip() if reasoning else None)

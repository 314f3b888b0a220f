"""Hostile model output: nothing a policy writes makes the interpreter raise. Each attack becomes a counted
malformed call that tells the agent what was wrong (or, for a stray tag, is read as what it is), also in a
real episode, and a fuzz over every tool of every built-in domain never gets an exception or an unchecked
call through."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import validators

from envs import load_tasks, open_session
from envs.registry import builtin_domains
from envs.session import openai_tool_schemas
from rollout.episode import EpisodeConfig, run_episode
from rollout.interpret import Interpreter, MalformedCall, ToolCall, ToolCatalog, parse_assistant
from rollout.interpret.formats import TOOL_CALL_FORMATS
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer
from tests.faults.replay_support import ReplayEngine

PROPERTIES = {"n": {"type": "integer"}, "note": {"type": "string"}, "ids": {"type": "array"}}
TOOLS = ToolCatalog([{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": PROPERTIES}}}])
DEEP = "[" * 1000 + "]" * 1000
LONG = "9" * 5000  # past Python's 4,300-digit limit for int(str)


def hermes(arguments: str) -> str:
    return f'<tool_call>\n{{"name": "lookup", "arguments": {arguments}}}\n</tool_call>'


def xml(*parameters: tuple[str, str], close: bool = True) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n" + ("</parameter>\n" if close else "") for k, v in parameters)
    return f"<tool_call>\n<function=lookup>\n{body}</function>\n</tool_call>"


@pytest.mark.parametrize(("fmt", "text", "kind", "detail"), [
    ("hermes", hermes('{"ids": ' + DEEP + "}"), "bad_json", "nests deeper than 32 levels"),
    ("hermes", hermes('{"ids": ' + "[" * 40 + "]" * 40 + "}"), "bad_json", "nests deeper than 32 levels"),
    ("hermes", hermes('{"n": ' + LONG + "}"), "bad_json", "more than 4300 digits"),
    ("hermes", hermes('{"n": "' + LONG + '"}'), "bad_arguments", "is not of type 'integer'"),
    ("qwen3_xml", xml(("n", LONG)), "bad_arguments", "is not of type 'integer'"),
    ("qwen3_xml", xml(("ids", DEEP)), "bad_arguments", "is not of type 'array'"),
])
def test_output_that_would_make_a_decoder_raise_is_a_malformed_call(fmt, text, kind, detail) -> None:
    turn = parse_assistant(text, TOOLS, fmt)
    (call,) = turn.calls
    assert isinstance(call, MalformedCall) and call.kind == kind
    assert detail in call.message and call.message.endswith("The call was not run.")


def test_a_parameter_without_its_close_does_not_swallow_the_next_call() -> None:
    """qwen3_xml: the first call's unclosed parameter would otherwise take the second call in as text."""
    text = xml(("note", "hello"), close=False) + "\n" + xml(("n", "3"))
    first, second = parse_assistant(text, TOOLS, "qwen3_xml").calls
    assert isinstance(first, MalformedCall) and first.kind == "bad_xml"
    assert "parameter 'note' has no </parameter>" in first.detail
    assert second == ToolCall("lookup", {"n": 3})


def test_a_hermes_call_without_its_close_does_not_swallow_the_next_call() -> None:
    """Hermes: a call missing </tool_call> took the next call's close for its own, and the next call with it."""
    text = hermes('{"n": 1}').removesuffix("</tool_call>") + "\n" + hermes('{"n": 2}')
    first, second = parse_assistant(text, TOOLS, "hermes").calls
    assert isinstance(first, MalformedCall) and first.kind == "unclosed" and '"n": 2' not in first.raw
    assert second == ToolCall("lookup", {"n": 2})


@pytest.mark.parametrize("fmt", TOOL_CALL_FORMATS)
def test_a_stray_think_close_after_a_call_keeps_the_call(fmt) -> None:
    call = hermes('{"n": 1}') if fmt == "hermes" else xml(("n", "1"))
    turn = parse_assistant(call + "\n</think>", TOOLS, fmt)
    assert turn.tool_calls == [ToolCall("lookup", {"n": 1})] and turn.reasoning is None
    assert "</think>" not in turn.visible
    # where the prompt opened the reasoning block, everything before its close is still reasoning
    assert parse_assistant(call + "\n</think>", TOOLS, fmt, opened_by_prompt=True).calls == ()


def test_an_episode_survives_every_attack_and_counts_them(tmp_path) -> None:
    """The hostile turns of the attacks above, written by the policy in a real library episode: the episode
    ends as the agent ended it, scored, with each attack counted as a malformed call."""
    interpreter = Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path))
    task = next(t for t in load_tasks("library", split="train") if t.template == "renew_loan")
    attacks = [hermes('{"ids": ' + DEEP + "}").replace("lookup", "find_member"),
               hermes('{"n": ' + LONG + "}").replace("lookup", "find_member"),
               hermes('{"card": ' + "[" * 40 + "]" * 40 + "}").replace("lookup", "find_member")]
    engine = ReplayEngine(interpreter, [*attacks, "I could not help, sorry."])
    config = EpisodeConfig(max_turns=8, max_tokens_per_turn=4096, token_budget=60_000)
    result = asyncio.run(run_episode(task, engine, interpreter, group_id="g", config=config, opener=open_session))
    trajectory = result.trajectory
    assert trajectory.system_error is None and trajectory.termination == "agent_done"
    assert trajectory.reward == 0.0 and trajectory.malformed_tool_calls == len(attacks)


FRAGMENTS = st.sampled_from([
    "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<think>",
    "</think>", "{", "}", "[", "]", '"', ":", ",", "\n", " ", "null", "true", "-1", "1e999", "NaN", LONG, DEEP,
    '{"name": ', '"arguments": ', "\\u0000", "\\ud800", "<|im_end|>", ">", "=",
])


def domain_catalogs() -> list[tuple[str, ToolCatalog]]:
    return [(name, ToolCatalog(openai_tool_schemas(domain))) for name, domain in sorted(builtin_domains().items())]


@pytest.mark.parametrize(("domain", "catalog"), domain_catalogs(), ids=lambda value: getattr(value, "names", value))
@pytest.mark.parametrize("fmt", TOOL_CALL_FORMATS)
@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_output_never_raises_and_never_runs_an_unchecked_call(domain, catalog, fmt, data) -> None:
    names = st.sampled_from([*catalog.names, "no_such_tool"])
    pieces = st.lists(st.one_of(FRAGMENTS, names, st.text(max_size=12)), max_size=40)
    text = "".join(data.draw(pieces))
    turn = parse_assistant(text, catalog, fmt)
    for call in turn.calls:
        assert isinstance(call, ToolCall | MalformedCall)
        if isinstance(call, ToolCall):  # what runs fits its tool's schema
            schema = next(s["function"]["parameters"] for s in catalog.schemas if s["function"]["name"] == call.name)
            assert validators.validator_for(schema)(schema).is_valid(call.arguments)
        else:
            assert call.message.endswith("The call was not run.")

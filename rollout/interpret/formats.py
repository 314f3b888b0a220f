"""The two Qwen tool-call layouts, read from the text after a turn's reasoning.

Hermes JSON (Qwen2.5/3):  <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
qwen3_xml (Qwen3-Coder, Qwen3.5):
    <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>

Hermes JSON is decoded as one JSON value, so strings inside it may contain any tag. A qwen3_xml value is the
text between its tags minus the one newline the template writes on each side; it cannot contain
"</parameter>" (the layout has no escaping), and its type comes from the tool's schema (see coerce.py).
A block missing its closing tag is "unclosed" (usually a turn cut by the token cap). Output that would make a
decoder raise (JSON nested past `MAX_NESTING` levels, a number past Python's digit limit) is a malformed call
like any other, so no model output can stop an episode.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Literal

from rollout.interpret.calls import MalformedCall, MalformedKind, RawCall
from rollout.interpret.nesting import MAX_NESTING, nesting

ToolCallFormat = Literal["hermes", "qwen3_xml"]
TOOL_CALL_FORMATS: tuple[ToolCallFormat, ...] = ("hermes", "qwen3_xml")
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FUNCTION_OPEN, FUNCTION_CLOSE = "<function=", "</function>"
PARAMETER_OPEN, PARAMETER_CLOSE = "<parameter=", "</parameter>"
_ENDS_A_CALL = (FUNCTION_CLOSE, CALL_CLOSE, CALL_OPEN)  # a parameter's value never holds these

HERMES_LAYOUT = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
XML_LAYOUT = ("<tool_call>\n<function=<function-name>>\n<parameter=<argument-name>>\n<argument-value>\n"
              "</parameter>\n</function>\n</tool_call>")

_DECODER = json.JSONDecoder()
Parsed = tuple[RawCall | MalformedCall, int]  # the call and where its block ends


class _Malformed(ValueError):
    """A block that does not follow the layout; `detail` goes back to the agent."""


def split_tool_calls(text: str, fmt: ToolCallFormat) -> tuple[str, list[RawCall | MalformedCall]]:
    """(the text outside tool-call blocks, the blocks in order). Never raises on any text."""
    if fmt not in TOOL_CALL_FORMATS:
        raise ValueError(f"unknown tool call format {fmt!r}; use one of {TOOL_CALL_FORMATS}")
    outside: list[str] = []
    calls: list[RawCall | MalformedCall] = []
    pos = 0
    while (start := text.find(CALL_OPEN, pos)) != -1:
        outside.append(text[pos:start])
        call, pos = _parse_block(text, start, fmt)
        calls.append(call)
    outside.append(text[pos:])
    return "".join(outside), calls


def _parse_block(text: str, start: int, fmt: ToolCallFormat) -> Parsed:
    parse, unreadable, layout = _LAYOUTS[fmt]
    body = start + len(CALL_OPEN)
    try:
        return parse(text, start, body)
    except _Malformed as problem:
        close = text.find(CALL_CLOSE, body)
        following = text.find(CALL_OPEN, body)  # a call opened before this one closed: this one never closes
        if close == -1 or following != -1 and following < close:
            end = len(text) if close == -1 else following
            detail = f"the tool call has no closing {CALL_CLOSE}; end every call with it."
            return MalformedCall("unclosed", detail, text[start:end]), end
        end = close + len(CALL_CLOSE)
        detail = f"the tool call could not be read: {problem}. Write each call as\n{layout}"
        return MalformedCall(unreadable, detail, text[start:end]), end


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _expect_close(text: str, pos: int) -> int:
    pos = _skip_space(text, pos)
    if not text.startswith(CALL_CLOSE, pos):
        raise _Malformed(f"expected {CALL_CLOSE} at {text[pos:pos + 20]!r}")
    return pos + len(CALL_CLOSE)


def _parse_hermes(text: str, start: int, body: int) -> Parsed:
    try:
        value, pos = _DECODER.raw_decode(text, _skip_space(text, body))
    except json.JSONDecodeError as error:
        raise _Malformed(f"invalid JSON ({error.msg} at character {error.pos - body})") from None
    except RecursionError:
        raise _Malformed(f"the JSON nests deeper than {MAX_NESTING} levels") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise _Malformed(f"a number has more than {sys.get_int_max_str_digits()} digits") from None
    if nesting(value) > MAX_NESTING:
        raise _Malformed(f"the JSON nests deeper than {MAX_NESTING} levels")
    end = _expect_close(text, pos)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        raise _Malformed('expected a JSON object with a "name" string')
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments object as JSON text
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise _Malformed('"arguments" is a string that is not a JSON object') from None
    if not isinstance(arguments, dict):
        raise _Malformed('"arguments" must be a JSON object')
    return RawCall(value["name"], arguments, text_values=False, raw=text[start:end]), end


def _tag_name(text: str, pos: int, tag: str) -> tuple[str, int]:
    """The NAME of `<tag=NAME>` at `pos` and the position after `>`."""
    gt = text.find(">", pos)
    name = text[pos + len(tag):gt] if gt != -1 else ""
    if not name.strip() or "\n" in name or "<" in name:
        raise _Malformed(f"expected {tag}NAME> at {text[pos:pos + 30]!r}")
    return name, gt + 1


def _parse_xml(text: str, start: int, body: int) -> Parsed:
    pos = _skip_space(text, body)
    if not text.startswith(FUNCTION_OPEN, pos):
        raise _Malformed(f"expected {FUNCTION_OPEN}NAME> after {CALL_OPEN}")
    name, pos = _tag_name(text, pos, FUNCTION_OPEN)
    arguments: dict[str, str] = {}
    while not text.startswith(FUNCTION_CLOSE, pos := _skip_space(text, pos)):
        if not text.startswith(PARAMETER_OPEN, pos):
            raise _Malformed(f"expected {PARAMETER_OPEN}NAME> or {FUNCTION_CLOSE} at {text[pos:pos + 20]!r}")
        key, pos = _tag_name(text, pos, PARAMETER_OPEN)
        close = text.find(PARAMETER_CLOSE, pos)
        cut = min((found for tag in _ENDS_A_CALL if (found := text.find(tag, pos, close)) != -1), default=-1)
        if close == -1 or cut != -1:  # the value would swallow the end of its call (and the calls after it)
            raise _Malformed(f"parameter {key!r} has no {PARAMETER_CLOSE} before "
                             f"{text[cut:cut + 20] if cut != -1 else 'the end'!r}")
        if key.strip() in arguments:
            raise _Malformed(f"parameter {key!r} is given twice")
        arguments[key.strip()] = _unwrap(text[pos:close])
        pos = close + len(PARAMETER_CLOSE)
    end = _expect_close(text, pos + len(FUNCTION_CLOSE))
    return RawCall(name.strip(), arguments, text_values=True, raw=text[start:end]), end


def _unwrap(value: str) -> str:
    """Drop the newline the layout puts on each side of a value (and nothing more)."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


_LAYOUTS: dict[ToolCallFormat, tuple[Callable[[str, int, int], Parsed], MalformedKind, str]] = {
    "hermes": (_parse_hermes, "bad_json", HERMES_LAYOUT),
    "qwen3_xml": (_parse_xml, "bad_xml", XML_LAYOUT),
}

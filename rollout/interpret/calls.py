"""What a tool-call block in model output becomes: a call to run, or a malformed call to report back.

A malformed call never raises: it is answered with a tool result that says what was wrong, so the policy
learns from it, and it is counted by kind so training can watch the format error rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

MalformedKind = Literal["unclosed", "bad_json", "bad_xml", "unknown_tool", "bad_arguments"]
MALFORMED_KINDS: tuple[MalformedKind, ...] = ("unclosed", "bad_json", "bad_xml", "unknown_tool", "bad_arguments")


@dataclasses.dataclass(frozen=True)
class RawCall:
    """A syntactically complete call before its tool and arguments are checked. `text_values`: every
    argument value is the text the model wrote (qwen3_xml), not a typed JSON value (Hermes)."""

    name: str
    arguments: dict[str, Any]
    text_values: bool
    raw: str


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """A call to run: a known tool and arguments coerced to, and valid against, its JSON schema."""

    name: str
    arguments: dict[str, Any]

    def as_openai(self) -> dict[str, Any]:
        """The OpenAI chat form chat templates render (`tool_calls` entries of an assistant message)."""
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclasses.dataclass(frozen=True)
class MalformedCall:
    """A block that cannot be run. `detail` names the problem and the fix; `raw` is the block as written."""

    kind: MalformedKind
    detail: str
    raw: str
    name: str | None = None

    @property
    def message(self) -> str:
        """The tool result the agent is sent in place of the call's result."""
        return f"Error: {self.detail} The call was not run."

"""Chat messages for what answers an agent turn: tool results and malformed-call errors."""

from __future__ import annotations

import json

from mcp.types import CallToolResult, TextContent

from rollout.interpret.calls import MalformedCall


def tool_message(result: CallToolResult) -> dict[str, str]:
    """An MCP tool result as a `tool` message. Error results already carry their message as text (the
    environment's refusal); non-text parts are named, not dropped silently."""
    parts = [part.text if isinstance(part, TextContent) else f"[{part.type} content omitted]"
             for part in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    return {"role": "tool", "content": "\n".join(parts)}


def malformed_message(call: MalformedCall) -> dict[str, str]:
    """What the agent is told in place of the result of a call that could not run."""
    return {"role": "tool", "content": call.message}

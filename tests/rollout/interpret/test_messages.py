"""What answers an agent turn: MCP tool results and malformed-call errors as tool messages; the token
sequence's bookkeeping."""

from __future__ import annotations

import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from rollout.interpret import MalformedCall, TokenSequence, malformed_message, tool_message


def test_tool_results_become_tool_messages():
    ok = CallToolResult(content=[TextContent(type="text", text='{"plan": "basic"}')])
    refused = CallToolResult(content=[TextContent(type="text", text="Unknown tool: nope")], is_error=True)
    mixed = CallToolResult(content=[TextContent(type="text", text="scan:"),
                                    ImageContent(type="image", data="AA==", mime_type="image/png")])
    structured = CallToolResult(content=[], structured_content={"n": 1})
    assert tool_message(ok) == {"role": "tool", "content": '{"plan": "basic"}'}
    assert tool_message(refused) == {"role": "tool", "content": "Unknown tool: nope"}
    assert tool_message(mixed)["content"] == "scan:\n[image content omitted]"
    assert tool_message(structured)["content"] == '{"n": 1}'
    bad = MalformedCall("unknown_tool", "there is no tool named 'x'.", "<tool_call>...")
    assert malformed_message(bad) == {"role": "tool",
                                      "content": "Error: there is no tool named 'x'. The call was not run."}


def test_token_sequence_masks_only_sampled_tokens():
    seq = TokenSequence()
    seq.add_context([1, 2])
    seq.add_sampled([3, 4], [-0.5, -0.25])
    assert (seq.token_ids, seq.loss_mask, seq.logprobs, len(seq)) == ([1, 2, 3, 4], [0, 0, 1, 1],
                                                                       [0.0, 0.0, -0.5, -0.25], 4)
    with pytest.raises(ValueError, match="2 sampled ids but 1 log-probs"):
        seq.add_sampled([5, 6], [-1.0])

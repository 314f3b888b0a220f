"""Shared material for the interpretation tests: tools with every argument type, tokenizers, a 6-turn
conversation, and how the assistant turns of a rendered conversation look as sampled text."""

from __future__ import annotations

from typing import Any

from rollout.interpret import AssistantTurn, ChatRenderer

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "find_account", "description": "Find an account by phone.",
        "parameters": {"type": "object", "properties": {
            "phone": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}}}}},
    {"type": "function", "function": {
        "name": "get_plan", "description": "Read the plan of an account.",
        "parameters": {"type": "object", "required": ["account_id"], "properties": {
            "account_id": {"type": "string"},
            "include_history": {"type": "boolean"},
            "months": {"type": "integer", "minimum": 1, "maximum": 24}}}}},
    {"type": "function", "function": {
        "name": "update_plan", "description": "Change a plan.",
        "parameters": {"type": "object", "required": ["account_id", "tier"], "$defs": {
            "Tier": {"enum": ["basic", "premium"], "type": "string"}}, "properties": {
            "account_id": {"type": "string"},
            "tier": {"$ref": "#/$defs/Tier"},
            "monthly_cap": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
            "notify": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"}}}}},
]


def assistant_message(turn: AssistantTurn) -> dict[str, Any]:
    """An interpreted turn as an OpenAI-style assistant message (valid calls only), to compare with the
    conversation's message it was sampled from."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.visible}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [call.as_openai() for call in turn.tool_calls]
    return message


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def six_turn_conversation() -> list[dict[str, Any]]:
    """system + tools, user, assistant (reasoning, two calls), tool results, assistant reply, user,
    assistant (one call), tool result, assistant reply, user."""
    return [
        {"role": "system", "content": "You are the utility's support agent. Verify the holder first."},
        {"role": "user", "content": "Hi, my number is +1-541-555-1000. What plan am I on?"},
        {"role": "assistant", "content": "", "reasoning_content": "Find the account, then read its plan.",
         "tool_calls": [call("find_account", phone="+1-541-555-1000"),
                        call("get_plan", account_id="AC-1042", include_history=True, months=3)]},
        {"role": "tool", "content": '{"account_id": "AC-1042", "holder": "Zara Whitlock"}'},
        {"role": "tool", "content": '{"tier": "basic", "history": []}'},
        {"role": "assistant", "content": "You are on the basic plan, Zara. Shall I upgrade it?",
         "reasoning_content": "Basic plan; offer the upgrade."},
        {"role": "user", "content": "Yes: premium, with a cap of 120.5 and texts to me. Ünïcödé ok? 😀"},
        {"role": "assistant", "content": "Upgrading now.",
         "tool_calls": [call("update_plan", account_id="AC-1042", tier="premium", monthly_cap=120.5,
                             notify=["sms"], options={"prorate": False, "note": None})]},
        {"role": "tool", "content": "Error executing tool update_plan: a manager must approve caps above 100"},
        {"role": "assistant", "content": "A manager must approve that cap; I have not changed your plan.",
         "reasoning_content": "Refused: do not retry without approval."},
        {"role": "user", "content": "Fine, thanks."},
    ]


def sampled_text(renderer: ChatRenderer, messages: list[dict[str, Any]], index: int) -> str:
    """What an engine would have sampled for assistant message `index`: its rendering after the generation
    prompt, up to and including <|im_end|> (what the template writes after that token is not sampled)."""
    return renderer.decode(renderer.assistant_ids(messages[:index + 1]))

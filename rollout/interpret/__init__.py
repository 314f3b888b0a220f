"""Interpretation: the one module training and evaluation use to turn conversations into tokens
and model output into actions. No JAX.

An episode loop::

    interp = Interpreter.from_pretrained(model_dir, tool_call_format="hermes")    # once per run
    tools = ToolCatalog(session.tool_schemas)                                     # once per tool set
    seq = TokenSequence()
    seq.add_context(interp.first_prompt([*session.system_messages, {"role": "user", "content": opening}], tools))
    while ...:
        gen = await engine.generate(seq.token_ids, SamplingParams(..., stop_token_ids=interp.stop_token_ids))
        seq.add_sampled(gen.output_ids, gen.logprobs)           # exactly as sampled
        turn = interp.interpret(gen.output_ids, tools)          # AssistantTurn; never raises
        if turn.calls:
            replies = [tool_message(await session.call_tool(c.name, c.arguments)) if isinstance(c, ToolCall)
                       else malformed_message(c) for c in turn.calls]
        else:
            replies = [{"role": "user", "content": (await session.user_reply(turn.visible)).text}]
        seq.add_context(interp.continuation(gen.output_ids, replies))   # closes a truncated turn, then delta

Modules: render (first prompt, anchored deltas, truncation), reasoning (<think> split), formats (Hermes JSON
and qwen3_xml blocks), coerce (schema types), tools (catalog, validation), calls and turn (typed results),
messages (tool results as messages), sequence (ids, loss mask, log-probs).
"""

from rollout.interpret.calls import MALFORMED_KINDS, MalformedCall, MalformedKind, ToolCall
from rollout.interpret.coerce import coerce_arguments, coerce_json, coerce_text
from rollout.interpret.formats import TOOL_CALL_FORMATS, ToolCallFormat, split_tool_calls
from rollout.interpret.interpreter import Interpreter
from rollout.interpret.messages import malformed_message, tool_message
from rollout.interpret.reasoning import ReasoningState, split_reasoning
from rollout.interpret.render import AnchorMismatchError, ChatRenderer, TemplateError
from rollout.interpret.sequence import TokenSequence
from rollout.interpret.tools import ToolCatalog
from rollout.interpret.turn import AssistantTurn, parse_assistant

__all__ = [
    "MALFORMED_KINDS", "TOOL_CALL_FORMATS", "AnchorMismatchError", "AssistantTurn", "ChatRenderer", "Interpreter",
    "MalformedCall", "MalformedKind", "ReasoningState", "TemplateError", "TokenSequence", "ToolCall",
    "ToolCallFormat", "ToolCatalog", "coerce_arguments", "coerce_json", "coerce_text", "malformed_message",
    "parse_assistant", "split_reasoning", "split_tool_calls", "tool_message",
]

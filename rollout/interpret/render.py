"""Conversations to token ids with the tokenizer's chat template, turn by turn, never re-tokenising the past.

The first prompt is rendered whole. After that the trajectory grows by the policy's sampled ids, kept as
sampled, and by deltas for the turns that follow (tool results, user replies), each rendered behind a fixed
anchor conversation: render anchor + new turns, check that its ids start with the anchor's ids up to and
including the anchor's closing <|im_end|>, token by token, and keep the rest. The rest therefore begins with
whatever the template writes after an assistant turn's <|im_end|> (our template and Qwen's: "\n") and ends
with the next generation prompt, so decoding the whole trajectory gives the template's rendering of the whole
conversation. A template that renders earlier turns differently once later turns follow cannot be used
this way; the check raises AnchorMismatchError instead of silently re-tokenising.

Truncation: a turn that did not end with <|im_end|> (cut by the token cap, or ended by another stop token)
is closed with an <|im_end|> the policy did not sample; it is part of the next delta and so loss-masked 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rollout.interpret.formats import TOOL_CALL_FORMATS, ToolCallFormat
from rollout.interpret.reasoning import THINK_OPEN
from rollout.interpret.tools import ToolCatalog

if TYPE_CHECKING:  # transformers brings torch: imported only where a tokenizer loads
    from transformers import PreTrainedTokenizerBase

Message = Mapping[str, Any]
END_OF_TURN = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
ANCHOR: tuple[Message, ...] = ({"role": "user", "content": "anchor"}, {"role": "assistant", "content": "anchor"})


class TemplateError(ValueError):
    """The tokenizer or its chat template cannot render Qwen-style turns."""


class AnchorMismatchError(TemplateError):
    """The template rendered the anchor differently once new turns followed it."""


class ChatRenderer:
    """Token ids for the first prompt and for every later non-assistant turn. `template_kwargs` reach the
    chat template on every render (e.g. enable_thinking); `tool_call_format` is passed as one of them."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, tool_call_format: ToolCallFormat = "hermes",
                 template_kwargs: Mapping[str, Any] | None = None) -> None:
        if tool_call_format not in TOOL_CALL_FORMATS:
            raise ValueError(f"unknown tool call format {tool_call_format!r}; use one of {TOOL_CALL_FORMATS}")
        if not tokenizer.chat_template:
            raise TemplateError("the tokenizer has no chat template; save one with the model (tokenizer_config "
                                "or chat_template.jinja), e.g. tbjax/assets/chat_template.jinja")
        self.tokenizer = tokenizer
        self.tool_call_format: ToolCallFormat = tool_call_format
        self.template_kwargs = {**(template_kwargs or {}), "tool_call_format": tool_call_format}
        end_of_turn_id = self._token_id(END_OF_TURN)
        if end_of_turn_id is None:
            raise TemplateError(f"the tokenizer has no {END_OF_TURN} token; it is not a Qwen-style chat tokenizer")
        self.end_of_turn_id: int = end_of_turn_id
        stops = (self.end_of_turn_id, self._token_id(END_OF_TEXT), tokenizer.eos_token_id)
        self.stop_token_ids: tuple[int, ...] = tuple(dict.fromkeys(t for t in stops if isinstance(t, int)))
        self.special_tokens: tuple[str, ...] = tuple(tokenizer.all_special_tokens)
        anchor_ids = self.encode(self.render(ANCHOR))
        ends = [i for i, token in enumerate(anchor_ids) if token == self.end_of_turn_id]
        if not ends:
            raise TemplateError(f"the chat template closes no turn with {END_OF_TURN}")
        self._anchor_prefix = anchor_ids[:ends[-1] + 1]
        opening = self.render(ANCHOR[:1], add_generation_prompt=True)[len(self.render(ANCHOR[:1])):]
        self.opens_reasoning = opening.rstrip().endswith(THINK_OPEN)  # the prompt starts the <think> block

    def _token_id(self, token: str) -> int | None:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        return token_id if isinstance(token_id, int) and token_id != self.tokenizer.unk_token_id else None

    def render(self, messages: Sequence[Message], *, tools: ToolCatalog | None = None,
               add_generation_prompt: bool = False) -> str:
        """The chat template's text for `messages` (what the token ids must decode to)."""
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], tools=[dict(s) for s in tools.schemas] if tools else None, tokenize=False,
            add_generation_prompt=add_generation_prompt, **self.template_kwargs)
        if not isinstance(text, str):
            raise TemplateError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Exact text of `token_ids`, special tokens included."""
        text = self.tokenizer.decode(list(token_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if not isinstance(text, str):  # a batch decodes to a list; one sequence to its text
            raise TypeError(f"decoding one sequence returned {type(text).__name__}, not text")
        return text

    def first_prompt(self, messages: Sequence[Message], tools: ToolCatalog | None = None) -> list[int]:
        """System messages (policy), tools and the first user turn, ending with the generation prompt."""
        return self.encode(self.render(messages, tools=tools, add_generation_prompt=True))

    def assistant_ids(self, messages: Sequence[Message]) -> list[int]:
        """The ids of the last message of `messages`, an assistant turn, as a policy samples them after the rest:
        its rendering after the generation prompt, through its <|im_end|> (what follows is the next prompt's).
        For turns no policy sampled (synthetic drills), in exactly the tokens a sampled turn has."""
        before = self.render(messages[:-1], add_generation_prompt=True)
        after = self.render(messages)
        if not after.startswith(before):
            raise TemplateError("the chat template renders a conversation's start differently once an assistant "
                                "turn follows it; use a prefix-stable template (tbjax/assets/chat_template.jinja)")
        turn = after[len(before):]
        if END_OF_TURN not in turn:
            raise TemplateError(f"the chat template closes the assistant's turn without {END_OF_TURN}")
        return self.encode(turn[:turn.rindex(END_OF_TURN) + len(END_OF_TURN)])

    def delta(self, messages: Sequence[Message]) -> list[int]:
        """Ids for `messages` (tool results, a user turn) following an assistant turn that ended with
        <|im_end|>: what the template writes after that token, the turns, and the next generation prompt."""
        if not messages:
            raise ValueError("a delta needs at least one new message")
        full = self.encode(self.render([*ANCHOR, *messages], add_generation_prompt=True))
        prefix = self._anchor_prefix
        if full[:len(prefix)] != prefix:
            at = next((i for i, (a, b) in enumerate(zip(prefix, full, strict=False)) if a != b), len(full))
            raise AnchorMismatchError(
                f"the chat template renders the anchor conversation differently when {len(messages)} new "
                f"message(s) follow it (first difference at token {at}: "
                f"{self.decode(prefix[at:at + 8])!r} alone vs {self.decode(full[at:at + 8])!r}); appending "
                "deltas would not match a full rendering. Use a template whose rendering of past turns does not "
                "depend on later ones (tbjax/assets/chat_template.jinja).")
        return full[len(prefix):]

    def continuation(self, sampled_ids: Sequence[int], messages: Sequence[Message]) -> list[int]:
        """Everything to append after the sampled ids of an assistant turn: the <|im_end|> it did not sample
        (only if it did not end with one) and the delta for `messages`. None of it is policy-sampled."""
        closing = [] if sampled_ids and sampled_ids[-1] == self.end_of_turn_id else [self.end_of_turn_id]
        return closing + self.delta(messages)

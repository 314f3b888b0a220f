"""The one object an episode loop (training or evaluation) uses for tokens in and actions out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollout.interpret.formats import ToolCallFormat
from rollout.interpret.render import ChatRenderer
from rollout.interpret.tools import ToolCatalog
from rollout.interpret.turn import AssistantTurn, parse_assistant


class Interpreter(ChatRenderer):
    """ChatRenderer plus reading the policy's output in the same tool-call format it was told to use."""

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, *, tool_call_format: ToolCallFormat = "hermes",
                        template_kwargs: Mapping[str, Any] | None = None) -> Interpreter:
        """Load the tokenizer (and its chat template) saved with a model. transformers is imported here, not at
        the top: it brings torch, and parsing a config or printing --help must not wait for it."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        return cls(tokenizer, tool_call_format=tool_call_format, template_kwargs=template_kwargs)

    def interpret(self, sampled_ids: Sequence[int], tools: ToolCatalog) -> AssistantTurn:
        """The sampled ids of one assistant turn (as the engine returned them, stop token included)."""
        truncated = not sampled_ids or sampled_ids[-1] not in self.stop_token_ids
        return parse_assistant(self.decode(sampled_ids), tools, self.tool_call_format, truncated=truncated,
                               opened_by_prompt=self.opens_reasoning, special_tokens=self.special_tokens)

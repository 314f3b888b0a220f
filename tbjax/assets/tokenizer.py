"""A small byte-level BPE tokenizer with Qwen's special tokens and our chat template, trained here.

Tests and the laptop default need a real tokenizer (real merges, real special-token handling, the same
`transformers` loading path as a Qwen checkpoint) without downloading one. Qwen marks the chat delimiters
as special (dropped by `skip_special_tokens`) and the tool/think tags as ordinary added tokens, and so do we.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TAG_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
# Qwen's pre-tokenization: every digit is its own token and a word keeps at most one leading non-letter, so a
# value reads as the same tokens in the user's sentence, a tool result and a JSON argument. A policy copies an
# id by matching tokens; GPT-2's byte-level split ("Ġ2", "0001" here, "200" there) makes that a lookup table.
QWEN_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (Path(__file__).parent / "chat_template.jinja").read_text()

BASE_CORPUS = (
    "The customer asked to change the plan. I will look up the account first and verify the identity.",
    "Thank you! Your request has been completed. Is there anything else I can help you with today?",
    "I'm sorry, but the policy does not allow that change. A manager must approve refunds above the limit.",
    '{"name": "get_account", "arguments": {"account_id": "AC-1042", "include_history": true, "limit": 10}}',
    "Please provide your full name, date of birth and the last four digits of your phone number.",
    "0123456789 +-*/=()[]{}<>:;,.!?'\"_@#$%&|\\~` \n\t abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
)


@functools.cache
def domain_corpus() -> tuple[str, ...]:
    """The built-in domains' policies and tool schemas: what tiny policies read most, so a BPE trained on it
    keeps their prompts about as short as Qwen's 151k vocabulary does."""
    from envs import builtin_domains
    from envs.session import openai_tool_schemas

    texts = []
    for domain in builtin_domains().values():
        texts += [domain.system_prompt(), json.dumps(openai_tool_schemas(domain))]
    return tuple(texts)


def train_tokenizer(texts: Iterable[str] | None = None, vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """Byte-level BPE over `texts` (default: a base corpus plus the built-in domains' text); every byte is
    representable, so no text is ever unknown. A small corpus stops below `vocab_size`."""
    texts = list(BASE_CORPUS) + list(domain_corpus()) if texts is None else list(texts)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[],
        chat_template=CHAT_TEMPLATE,
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS[1:])})
    tokenizer.add_tokens(list(TAG_TOKENS), special_tokens=False)
    return tokenizer


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    return out

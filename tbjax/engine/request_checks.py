"""What the embedded engine's worker cannot run, refused on the caller's side before it is queued, and the
memory tags a caller may name."""

from __future__ import annotations

import numbers
from collections.abc import Collection, Sequence

import numpy as np

from rollout.engines.protocol import SamplingParams
from rollout.engines.sglang_settings import MEMORY_TAGS

INT32_MIN, INT32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)
FLOAT32_MAX = float(np.finfo(np.float32).max)
# stop ids a request may give: decoding compares every row's sampled token with this many (padded with -1), so
# no stop list has a shape of its own to compile for (each new length once compiled decoding anew while every
# request waited; tbjax/README.md's fault table)
MAX_STOP_TOKENS = 32


def refuse_unrunnable(input_ids: Sequence[int], sampling: SamplingParams, vocab_size: int) -> None:
    """Refuses a request the worker could not build into its int32 and float32 rows (that raised in the
    worker thread, which then failed every request in flight and served no more), or whose result the model
    would silently change: token ids outside [0, vocab_size) (the embedding lookup clamps them to another
    token; a stop id there never matches), more than `MAX_STOP_TOKENS` stop ids, a seed, budget or top-k
    that is not an integer (within int32 where a row holds it), a sampling value that is not finite in
    float32 (NaN log-probs). What passes cannot stop the worker, which serves every other request."""
    for name, ids in (("input_ids", input_ids), ("stop_token_ids", sampling.stop_token_ids)):
        if not _token_ids(ids, vocab_size):
            raise ValueError(f"{name} must be a list of integer token ids in [0, {vocab_size}), the model's "
                             "vocabulary")
    if len(sampling.stop_token_ids) > MAX_STOP_TOKENS:
        raise ValueError(f"{len(sampling.stop_token_ids)} stop_token_ids: the engine takes at most "
                         f"{MAX_STOP_TOKENS} (a model has a handful of end tokens)")
    for name, value in (("max_new_tokens", sampling.max_new_tokens), ("top_k", sampling.top_k)):
        if not (_integer(value) and INT32_MIN <= value <= INT32_MAX):
            raise ValueError(f"{name} must be an integer within int32, got {value!r}")
    if sampling.seed is not None and not _integer(sampling.seed):
        raise ValueError(f"seed must be an integer or None, got {sampling.seed!r}")
    for name in ("temperature", "top_p", "min_p"):
        value = getattr(sampling, name)
        if not _finite_in_float32(value):
            raise ValueError(f"{name} must be a number, finite in float32, got {value!r}")


def _finite_in_float32(value: object) -> bool:
    """A real number (Python's or NumPy's) within float32's range: not NaN, not infinite, not an integer past
    float32's largest value (compared exactly, so one past float64's range is refused rather than overflowing)."""
    if isinstance(value, numbers.Integral):
        return abs(int(value)) <= FLOAT32_MAX
    return isinstance(value, numbers.Real) and abs(float(value)) <= FLOAT32_MAX  # False for NaN


def _integer(value: object) -> bool:
    """An integer of any width (Python's or NumPy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _token_ids(ids: object, vocab_size: int) -> bool:
    """Whether `ids` is a flat sequence of integer token ids in [0, vocab_size)."""
    try:
        array = np.asarray(ids)  # dtype kind "O" for ints past int64 or mixed types, "U" for a string
    except ValueError:  # ragged
        return False
    return array.ndim == 1 and (array.size == 0 or array.dtype.kind in "iu" and 0 <= array.min()
                                and array.max() < vocab_size)


def memory_tags(tags: Collection[str] | None) -> set[str]:
    """SGLang's tags (None: all of them); an unknown tag is the caller's mistake, not something to ignore."""
    known: set[str] = set(MEMORY_TAGS)
    if tags is None:
        return known
    unknown = set(tags) - known
    if unknown:
        raise ValueError(f"unknown memory tags {sorted(unknown)}; known: {sorted(known)}")
    return set(tags)

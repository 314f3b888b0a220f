"""Rule-based rubrics: which normalised phrases occur in the agent's replies, on word boundaries?

Normalisation makes "$1,250.00", "1250.00 USD" and "1250.00" comparable: Unicode NFKC, lower case, thousands
separators dropped, every character other than letters, digits and the decimal point turned into a space,
whitespace collapsed. Phrases match whole tokens, so "45" does not match inside "145".
"""

from __future__ import annotations

import re
import unicodedata

from envs.tasks import Rubric
from envs.verdict import RubricResult

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NOT_WORD = re.compile(r"[^0-9a-z.]+")
_LOOSE_DOT = re.compile(r"\.(?!\d)|(?<!\d)\.")


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = _THOUSANDS.sub("", text)
    text = _NOT_WORD.sub(" ", text)
    text = _LOOSE_DOT.sub(" ", text)  # keep decimal points, drop sentence full stops
    return " ".join(text.split())


def _occurs(phrase: str, padded: str) -> bool:
    """Whole-token occurrence of `phrase` in `padded`: normalised text with a space at either end."""
    needle = normalise(phrase)
    return bool(needle) and f" {needle} " in padded


def mentions(text: str, phrase: str) -> bool:
    """Whole-token occurrence of `phrase` in `text`, both normalised."""
    return _occurs(phrase, f" {normalise(text)} ")


def check_rule(rubric: Rubric, replies: str) -> RubricResult:
    """Grade a must_mention / must_not_mention / mention_at_most rubric on the agent's replies."""
    padded = f" {normalise(replies)} "  # normalised once: a precision rubric has dozens of phrases
    found = [p for p in rubric.phrases if _occurs(p, padded)]
    if rubric.kind == "must_mention":
        passed = bool(found)
        detail = f"mentioned {found[0]!r}" if found else f"none of {list(rubric.phrases)} mentioned"
    elif rubric.kind == "must_not_mention":
        passed = not found
        detail = "nothing forbidden mentioned" if passed else f"revealed {found}"
    elif rubric.kind == "mention_at_most":
        passed = len(found) <= rubric.limit
        detail = f"mentioned {len(found)} of {len(rubric.phrases)} (at most {rubric.limit} allowed)"
        detail += "" if passed else f", e.g. {found[:rubric.limit + 1]}"
    else:
        raise ValueError(f"check_rule grades phrase rubrics only, not {rubric.kind!r}")
    return RubricResult(kind=rubric.kind, description=rubric.description, passed=passed, detail=detail)

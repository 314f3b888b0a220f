"""Rule-based rubrics: does a normalised phrase occur in the agent's replies, on word boundaries?

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


def mentions(text: str, phrase: str) -> bool:
    """Whole-token occurrence of `phrase` in `text`, both normalised."""
    needle = normalise(phrase)
    return bool(needle) and f" {needle} " in f" {normalise(text)} "


def check_rule(rubric: Rubric, replies: str) -> RubricResult:
    """Grade a must_mention / must_not_mention rubric on the agent's replies."""
    found = [p for p in rubric.phrases if mentions(replies, p)]
    if rubric.kind == "must_mention":
        passed = bool(found)
        detail = f"mentioned {found[0]!r}" if found else f"none of {list(rubric.phrases)} mentioned"
    elif rubric.kind == "must_not_mention":
        passed = not found
        detail = "nothing forbidden mentioned" if passed else f"revealed {found}"
    else:
        raise ValueError(f"check_rule grades phrase rubrics only, not {rubric.kind!r}")
    return RubricResult(kind=rubric.kind, description=rubric.description, passed=passed, detail=detail)

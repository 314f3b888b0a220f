"""Hypothesis strategies for hostile JSON values, shared by the fuzz tests of tests/faults/.

What a careless or malicious client can put where a program expects one well-typed value: any JSON value
nested a few levels (NaN and ±Infinity included, as Python's json writes them), integers past every machine
width, floats at the edges, long and exotic text (control characters, right-to-left marks, astral-plane
characters, lone UTF-16 surrogates) and long lists. Each strategy is built once (building one costs more
than drawing from it).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

EDGE_INTEGERS = (-1, 0, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30))
EDGE_FLOATS = (float("nan"), float("inf"), float("-inf"), -0.0, 1e-320, 1e308, -1e308, 0.1)
ODD_TEXT = ("", " ", "\x00", "\ud800", "a\udfffb", "\u202eevil", "\U0001f600" * 3, "ß" * 40, "'; DROP TABLE x; --",
            "%s%n", "null", "1e999", "NaN", "-1", "0x10", "2026-02-30", "9999-12-31T25:61", "x" * 100_000)


@cache
def integers() -> st.SearchStrategy[int]:
    """Integers of any size, the machine-width edges often."""
    return st.sampled_from(EDGE_INTEGERS) | st.integers()


@cache
def floats() -> st.SearchStrategy[float]:
    """Floats of any value, NaN, infinities, subnormals and the largest magnitudes often."""
    return st.sampled_from(EDGE_FLOATS) | st.floats()


@cache
def texts() -> st.SearchStrategy[str]:
    """Text of any Unicode (lone surrogates included), the odd cases above often."""
    return st.sampled_from(ODD_TEXT) | st.text(max_size=40)


@cache
def scalars() -> st.SearchStrategy[Any]:
    return st.none() | st.booleans() | integers() | floats() | texts()


@cache
def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value: a scalar, or lists and objects of them nested a few levels."""
    return st.recursive(scalars(), lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(texts(), inner, max_size=4), max_leaves=max_leaves)


@cache
def long_lists() -> st.SearchStrategy[list[Any]]:
    """Lists long enough to find per-element costs and length limits, of short items: a quick test's size."""
    items = st.none() | st.booleans() | st.sampled_from(EDGE_INTEGERS + EDGE_FLOATS) | st.text(max_size=8)
    return st.builds(lambda item, n: [item] * n, items, st.sampled_from([1_000, 10_000]))

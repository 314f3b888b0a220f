"""How numbers read in reports and on the console: shares as percentages, their differences in percentage
points and bootstrap intervals of those differences.

Why one place: the comparison (compare.md), the pipeline's results.md and console lines must say the same
number the same way; a share printed as "0.5570" in one and "55.7%" in the other reads as two results."""

from __future__ import annotations


def pct(value: float | None) -> str:
    """A share in [0, 1] as a percentage with one decimal ("55.7%"); "n/a" for None."""
    return "n/a" if value is None else f"{100 * value:.1f}%"


def points(value: float | None) -> str:
    """A difference of two shares in signed percentage points ("+9.6 pts"); "n/a" for None."""
    return "n/a" if value is None else f"{100 * value:+.1f} pts"


def interval(ci: list[float] | tuple[float, float] | None) -> str:
    """An interval of a difference of shares, in signed points ("[+4.2, +15.1]"); "n/a" for None."""
    return "n/a" if ci is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


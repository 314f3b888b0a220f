"""How numbers read in reports and on the console: shares as percentages, their differences in percentage
points, bootstrap intervals of those differences, and large counts with a unit (1.2M, 8.0B).

Why one place: the comparison (compare.md), the pipeline's results.md and console lines must say the same
number the same way; a share printed as "0.5570" in one and "55.7%" in the other reads as two results."""

from __future__ import annotations

COUNT_UNITS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def pct(value: float | None) -> str:
    """A share in [0, 1] as a percentage with one decimal ("55.7%"); "n/a" for None."""
    return "n/a" if value is None else f"{100 * value:.1f}%"


def points(value: float | None) -> str:
    """A difference of two shares in signed percentage points ("+9.6 pts"); "n/a" for None."""
    return "n/a" if value is None else f"{100 * value:+.1f} pts"


def interval(ci: list[float] | tuple[float, float] | None) -> str:
    """An interval of a difference of shares, in signed points ("[+4.2, +15.1]"); "n/a" for None."""
    return "n/a" if ci is None else f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"


def count(value: int) -> str:
    """A count with one decimal and the largest unit it reaches (1_180_000 -> "1.2M", 8_030_000_000 ->
    "8.0B"), as people say model sizes; below a thousand, the number itself."""
    for scale, unit in COUNT_UNITS:
        if abs(value) >= scale * 0.99995:  # 999,960 is "1.0M", not "1000.0K"
            return f"{value / scale:.1f}{unit}"
    return str(value)

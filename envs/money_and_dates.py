"""How task templates state money and dates: the text a reference answer uses, the phrasings a must_mention
rubric accepts, and ISO date arithmetic.

Every desk grades an amount or a date the same way, so the phrasings live here once; a desk that wrote its own
would grade the same correct answer differently from the next desk.
"""

from __future__ import annotations

from datetime import date, timedelta

from envs.service_desk import usd


def money_phrases(cents: int) -> tuple[str, ...]:
    """Ways an answer may state an amount: always with cents ("84.20"), and also "84" when it is whole dollars."""
    exact = usd(cents)
    return (exact, str(cents // 100)) if cents % 100 == 0 else (exact,)


def spoken_date(iso: str) -> str:
    """A date (or the date part of a timestamp) as a reply says it: "May 20, 2026"."""
    day = date.fromisoformat(iso[:10])
    return f"{day:%B} {day.day}, {day.year}"


def date_phrases(iso: str, today: str) -> tuple[str, ...]:
    """Ways an answer may state a date: ISO, or month and day with the year ("May 20, 2026", "20 May 2026");
    without the year ("May 20", "20 May") too when the date falls in `today`'s year, where no listener would
    take it for another. A rubric phrase matches on word boundaries, so "May 20" also passes "May 20, 2026"."""
    day = date.fromisoformat(iso[:10])
    if day.year == date.fromisoformat(today[:10]).year:
        return (day.isoformat(), f"{day:%B} {day.day}", f"{day.day} {day:%B}")
    return (day.isoformat(), f"{day:%B} {day.day}, {day.year}", f"{day.day} {day:%B} {day.year}")


def days_after(iso: str, days: int) -> str:
    """The ISO date `days` after the date (or timestamp) `iso`; negative days count back."""
    return (date.fromisoformat(iso[:10]) + timedelta(days=days)).isoformat()

"""Shared parts of library task templates: the calling member, how they prove who they are, good standing,
and how money, dates and hours are written so that rubrics accept the natural ways of saying them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from envs.sdk import Fact, GenContext, ToolCall, UserScenario, call

# A member in good standing under policy rule 4 (`m` is the members row; parameters: today).
GOOD_STANDING = ("m.expires_on >= ? AND (SELECT b.owed_cents FROM member_balances b "
                 "WHERE b.member_id = m.member_id) < 1500")


def standing_params(ctx: GenContext) -> tuple[str]:
    return (ctx.today,)


@dataclass(frozen=True)
class Patron:
    """The member a task is about, seen from the desk: what they can tell, how the agent checks them."""

    row: dict[str, Any]

    @classmethod
    def load(cls, ctx: GenContext, member_id: str) -> Patron:
        return cls(ctx.read("SELECT * FROM members WHERE member_id = ?", (member_id,))[0])

    @property
    def id(self) -> str:
        return self.row["member_id"]

    def facts(self) -> tuple[Fact, ...]:
        return (
            Fact(name="library card number", value=self.row["card_number"], keywords=("card", "card number")),
            Fact(name="email", value=self.row["email"], keywords=("email", "e mail")),
            Fact(name="date of birth", value=self.row["date_of_birth"],
                 keywords=("date of birth", "birth", "birthday", "dob")),
            Fact(name="PIN", value=self.row["pin"], keywords=("pin",)),
        )

    def identify(self) -> list[ToolCall]:
        """Golden opening of every task: look the member up by card, then verify date of birth and PIN."""
        return [call("find_member", card_number=self.row["card_number"]),
                call("verify_member", member_id=self.id, date_of_birth=self.row["date_of_birth"],
                     pin=self.row["pin"])]

    def asks(self, opening: str, goal: str, *, confirms: bool = True) -> UserScenario:
        return UserScenario(
            opening=opening,
            goal=goal,
            persona=f"{self.row['full_name']}, a library member who answers briefly and sticks to the request",
            facts=self.facts(),
            unknown=("member id", "member number", "account id"),
            confirms=confirms,
        )


def weekday_date(iso: str) -> str:
    d = date.fromisoformat(iso)
    return f"{d:%A}, {d:%B} {d.day}, {d.year}"


def clock(hour: int) -> str:
    """14 -> "2 pm": how members say hours."""
    suffix = "am" if hour < 12 else "pm"
    return f"{(hour - 1) % 12 + 1} {suffix}"

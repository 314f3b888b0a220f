"""Building blocks shared by the utility templates: the caller, how they are verified, patches and phrasing.

Every caller knows their phone number, service address, the last four digits of their SSN and their billing
ZIP, never the internal account or meter ids, so the agent must look them up and verify them itself.
"""

from __future__ import annotations

from typing import Any

from envs.sdk import Fact, GenContext, ToolCall, UserScenario, call

NOT_KNOWN = ("account number", "account id", "meter id", "meter number", "bill id")


def holder(ctx: GenContext, account_id: str) -> dict[str, Any]:
    """The account row joined with its first premise's address (what the holder would quote)."""
    return ctx.read(
        "SELECT a.*, p.street, p.zip, p.city FROM accounts a JOIN premises p USING (account_id) "
        "WHERE a.account_id = ? ORDER BY p.premise_id LIMIT 1", (account_id,))[0]


def holder_of_meter(ctx: GenContext, meter_id: str) -> dict[str, Any]:
    account_id = ctx.read("SELECT p.account_id FROM meters m JOIN premises p USING (premise_id) "
                          "WHERE m.meter_id = ?", (meter_id,))[0]["account_id"]
    return holder(ctx, account_id)


def verification(person: dict[str, Any]) -> list[ToolCall]:
    """The opening of every golden path: find the account by phone, then verify the holder."""
    return [call("find_account", phone=person["phone"]),
            call("verify_holder", account_id=person["account_id"], ssn_last4=person["ssn_last4"],
                 billing_zip=person["billing_zip"])]


def caller(person: dict[str, Any], opening: str, goal: str) -> UserScenario:
    """The simulated holder: the facts they can give when asked, and the ids they cannot."""
    facts = (
        Fact(name="phone number", value=person["phone"], keywords=("phone", "telephone")),
        Fact(name="service address", value=f"{person['street']}, {person['city']} {person['zip']}",
             keywords=("address", "street", "service location")),
        Fact(name="SSN (last four digits)", value=person["ssn_last4"],
             keywords=("ssn", "social security", "last four", "last 4")),
        Fact(name="billing ZIP code", value=person["billing_zip"], keywords=("zip", "postal code", "postcode")),
    )
    return UserScenario(opening=opening, goal=goal, facts=facts, unknown=NOT_KNOWN,
                        persona=f"{person['holder_name']}, a Riverbend Power & Water customer; brief and cooperative")



"""Shared pieces of telecom task templates: who the caller is, how they prove it, how money and dates read."""

from __future__ import annotations

from typing import Any

from envs.sdk import Fact, GenContext, ToolCall, UserScenario, call

UNKNOWN = ("customer id", "account id", "account number")
ACTIVE_PLANS_BY_FEE = ["BASIC5", "PLUS20", "MAX50", "UNLTD"]
PLAN_NAMES = {"BASIC5": "Basic 5GB", "LEGACY10": "Legacy 10GB", "PLUS20": "Plus 20GB", "MAX50": "Max 50GB",
              "UNLTD": "Unlimited"}
PLAN_FEES = {"BASIC5": 2000, "LEGACY10": 2500, "PLUS20": 3500, "MAX50": 5000, "UNLTD": 6500}


def caller_facts(customer: dict[str, Any], phone: str | None = None) -> tuple[Fact, ...]:
    """What a real caller can say about themselves: phone, email, date of birth, PIN."""
    return (
        Fact(name="phone number", value=phone or customer["phone"], keywords=("phone", "mobile number")),
        Fact(name="email", value=customer["email"], keywords=("email", "e mail")),
        Fact(name="date of birth", value=customer["date_of_birth"], keywords=("date of birth", "birth", "dob")),
        Fact(name="PIN", value=customer["pin"], keywords=("pin",)),
    )


def identify(customer: dict[str, Any], phone: str | None = None) -> list[ToolCall]:
    """The golden opening of every task: look the caller up, then verify them."""
    return [
        call("find_customer", phone=phone or customer["phone"]),
        call("verify_identity", customer_id=customer["customer_id"], date_of_birth=customer["date_of_birth"],
             pin=customer["pin"]),
    ]


def lines_of(customer: dict[str, Any]) -> ToolCall:
    """The lookup before any call on a line: line ids appear in no opening, only in list_lines' result."""
    return call("list_lines", customer_id=customer["customer_id"])


def scenario(customer: dict[str, Any], opening: str, goal: str, phone: str | None = None) -> UserScenario:
    return UserScenario(
        opening=opening,
        goal=goal,
        persona=f"{customer['full_name']}, a customer who answers questions briefly and politely",
        facts=caller_facts(customer, phone),
        unknown=UNKNOWN,
    )


def customer_of(ctx: GenContext, customer_id: str) -> dict[str, Any]:
    return ctx.read("SELECT * FROM customers WHERE customer_id = ?", (customer_id,))[0]





"""Loan and hold templates: renewals the rules allow or refuse, lost copies, and holds."""

from __future__ import annotations

from typing import Any

from envs.domains.library.scenario import GOOD_STANDING, Patron, standing_params
from envs.sdk import DecisionNote, GenContext, TaskDraft, call, days_after, template

VARIANTS = 10
_LOAN = ("SELECT l.*, i.item_id, i.title, i.author FROM loans l JOIN copies c USING (copy_id) "
         "JOIN items i USING (item_id) JOIN members m ON m.member_id = l.member_id WHERE l.status = ? ")
_NO_WAITING = "NOT EXISTS (SELECT 1 FROM holds h WHERE h.item_id = i.item_id AND h.status = ?)"


def _renewable_loan(ctx: GenContext) -> dict[str, Any]:
    """An active loan that rule 5 allows to renew, held by a member in good standing (rule 4)."""
    return ctx.pick(f"{_LOAN} AND l.renewals < 2 AND i.new_release = 0 AND {_NO_WAITING} AND {GOOD_STANDING} "
                    "ORDER BY l.loan_id", ("active", "waiting", *standing_params(ctx)))


def _renew_opening(loan: dict[str, Any]) -> str:
    return f"Hi, could you renew {loan['title']} for me? I haven't finished it yet."


def _renew_draft(ctx: GenContext, loan: dict[str, Any], renew: bool, renewals: int, waiting: int,
                 patch: dict[str, list[dict[str, Any]]] | None = None) -> TaskDraft:
    """The request to renew `loan`, which list_loans shows with `renewals` and `waiting` holds (rule 5: at
    most two renewals, none while others wait) and the desk grants or refuses."""
    patron = Patron.load(ctx, loan["member_id"])
    steps = [*patron.identify(), call("get_member", member_id=patron.id), call("list_loans", member_id=patron.id)]
    renewal = call("renew_loan", loan_id=loan["loan_id"])
    return TaskDraft(scenario=patron.asks(_renew_opening(loan), f"{loan['title']} renewed"),
                     golden_path=[*steps, renewal] if renew else steps, initial_patch=patch or {},
                     violation=None if renew else renewal,
                     note=DecisionNote(after="list_loans", subject=loan["title"],
                                       facts={"renewals": str(renewals), "waiting_holds": str(waiting)}))


@template(kind="direct", split="train", variants=VARIANTS)
def renew_loan(ctx: GenContext) -> TaskDraft:
    loan = _renewable_loan(ctx)
    return _renew_draft(ctx, loan, renew=True, renewals=loan["renewals"], waiting=0)


@template(kind="forbidden", split="train", variants=VARIANTS)
def renew_past_the_limit(ctx: GenContext) -> TaskDraft:
    loan = _renewable_loan(ctx)
    patch = {"loans": [ctx.row_with("loans", "loan_id", loan["loan_id"], renewals=2)]}
    return _renew_draft(ctx, loan, renew=False, renewals=2, waiting=0, patch=patch)


@template(kind="forbidden", split="train", variants=VARIANTS)
def renew_with_others_waiting(ctx: GenContext) -> TaskDraft:
    loan = _renewable_loan(ctx)
    others = ctx.read("SELECT member_id, home_branch FROM members WHERE member_id <> ? ORDER BY member_id",
                      (loan["member_id"],))
    other = ctx.rng.choice(others)
    hold = {"hold_id": f"HD-{690001 + ctx.variant}", "item_id": loan["item_id"], "member_id": other["member_id"],
            "pickup_branch": other["home_branch"], "placed_on": days_after(ctx.today, -ctx.rng.randrange(1, 10)),
            "status": "waiting", "ready_until": None}
    return _renew_draft(ctx, loan, renew=False, renewals=loan["renewals"], waiting=1, patch={"holds": [hold]})


@template(kind="direct", split="train", variants=VARIANTS)
def report_lost_copy(ctx: GenContext) -> TaskDraft:
    loan = ctx.pick(f"{_LOAN} ORDER BY l.loan_id", ("active",))
    patron = Patron.load(ctx, loan["member_id"])
    where = ctx.rng.choice(["on the bus", "while moving house", "on holiday", "somewhere in the park"])
    return TaskDraft(
        scenario=patron.asks(f"I'm embarrassed, but I lost your copy of {loan['title']} {where}. I've looked "
                             "everywhere. Please report it as lost.", f"{loan['title']} reported lost"),
        golden_path=[*patron.identify(), call("list_loans", member_id=patron.id),
                     call("report_lost_copy", loan_id=loan["loan_id"])],
    )


def _hold_candidate(ctx: GenContext) -> tuple[Patron, dict[str, Any], dict[str, Any]]:
    """A member in good standing with room for another hold, and a lendable title they neither hold nor borrow."""
    member = ctx.pick(
        f"SELECT m.* FROM members m WHERE {GOOD_STANDING} AND (SELECT COUNT(*) FROM holds h "
        "WHERE h.member_id = m.member_id AND h.status IN (?, ?)) < 5 ORDER BY m.member_id",
        (*standing_params(ctx), "waiting", "ready"),
    )
    items = ctx.read(
        "SELECT i.* FROM items i WHERE i.loan_days > 0 AND NOT EXISTS (SELECT 1 FROM holds h WHERE "
        "h.item_id = i.item_id AND h.member_id = ? AND h.status IN (?, ?)) AND NOT EXISTS (SELECT 1 FROM loans l "
        "JOIN copies c USING (copy_id) WHERE c.item_id = i.item_id AND l.member_id = ? AND l.status = ?) "
        "ORDER BY i.item_id",
        (member["member_id"], "waiting", "ready", member["member_id"], "active"),
    )
    branch = ctx.read("SELECT * FROM branches ORDER BY branch_id")[ctx.rng.randrange(6)]
    return Patron(member), ctx.rng.choice(items), branch


def _hold_opening(item: dict[str, Any], branch: dict[str, Any]) -> str:
    return (f"Please put {item['title']} by {item['author']} on hold for me. I'd like to collect it at the "
            f"{branch['name']}.")


@template(kind="direct", split="train", variants=VARIANTS)
def place_hold(ctx: GenContext) -> TaskDraft:
    patron, item, branch = _hold_candidate(ctx)
    return TaskDraft(
        scenario=patron.asks(_hold_opening(item, branch), f"a hold on {item['title']} at {branch['name']}"),
        golden_path=[*patron.identify(), call("get_member", member_id=patron.id),
                     call("search_catalogue", query=item["title"]),
                     call("place_hold", member_id=patron.id, item_id=item["item_id"],
                          pickup_branch=branch["branch_id"])],
    )


@template(kind="forbidden", split="train", variants=VARIANTS)
def hold_while_not_in_good_standing(ctx: GenContext) -> TaskDraft:
    patron, item, branch = _hold_candidate(ctx)
    if ctx.variant % 2:  # an expired card
        patch = {"members": [ctx.row_with("members", "member_id", patron.id,
                                      expires_on=days_after(ctx.today, -ctx.rng.randrange(1, 120)))]}
    else:  # a fresh overdue fine that takes the unpaid total to $15.00 or more
        loan = ctx.rng.choice(ctx.read("SELECT loan_id FROM loans WHERE member_id = ? ORDER BY loan_id",
                                       (patron.id,)) or [{"loan_id": None}])
        patch = {"fines": [{"fine_id": f"FN-{480001 + ctx.variant}", "member_id": patron.id,
                            "loan_id": loan["loan_id"], "kind": "overdue", "amount_cents": 1500 + 25 * ctx.variant,
                            "assessed_on": days_after(ctx.today, -ctx.rng.randrange(2, 30)), "status": "unpaid"}]}
    return TaskDraft(
        scenario=patron.asks(_hold_opening(item, branch), f"a hold on {item['title']} at {branch['name']}"),
        golden_path=[*patron.identify(), call("get_member", member_id=patron.id)],
        initial_patch=patch,
        violation=call("place_hold", member_id=patron.id, item_id=item["item_id"], pickup_branch=branch["branch_id"]),
    )


TEMPLATES = [renew_loan, renew_past_the_limit, renew_with_others_waiting, report_lost_copy, place_hold,
             hold_while_not_in_good_standing]

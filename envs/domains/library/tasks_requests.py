"""Fine-waiver and inter-library loan templates: what the desk may grant, refer upward, or must refuse."""

from __future__ import annotations

from typing import Any

from envs.domains.library import seed_words as words
from envs.domains.library.scenario import GOOD_STANDING, Patron, standing_params
from envs.sdk import DecisionNote, GenContext, TaskDraft, call, days_after, template, usd

VARIANTS = 10
SMALL_FINES = [150, 275, 400, 525, 650, 800, 900, 1000]
LARGE_FINES = [1025, 1200, 1350, 1500, 1750, 2100, 2400]
EXCUSES = ["I was in hospital that week", "the branch book drop was closed", "I was away caring for my mother",
           "my flight home was cancelled"]


def _unpaid_fine(ctx: GenContext, kind: str) -> dict[str, Any]:
    """An unpaid fine of `kind` whose member has had no waiver in the last 365 days (rule 8)."""
    return ctx.pick(
        "SELECT f.*, i.title FROM fines f JOIN loans l USING (loan_id) JOIN copies c USING (copy_id) "
        "JOIN items i USING (item_id) WHERE f.kind = ? AND f.status = ? AND NOT EXISTS (SELECT 1 FROM waivers w "
        "JOIN fines g USING (fine_id) WHERE g.member_id = f.member_id AND w.waived_on >= ?) ORDER BY f.fine_id",
        (kind, "unpaid", days_after(ctx.today, -365)),
    )


def _waiver_task(ctx: GenContext, kind: str, amounts: list[int], outcome: str) -> TaskDraft:
    """A member asks to have a recent fine waived; `outcome` is waive, refer (staff request) or refuse."""
    fine = _unpaid_fine(ctx, kind)
    amount = ctx.rng.choice(amounts)
    patch = {"fines": [ctx.row_with("fines", "fine_id", fine["fine_id"], amount_cents=amount,
                                assessed_on=days_after(ctx.today, -ctx.rng.randrange(3, 80)))]}
    patron = Patron.load(ctx, fine["member_id"])
    steps = [*patron.identify(), call("list_fines", member_id=patron.id)]
    waiver = call("waive_fine", fine_id=fine["fine_id"], reason="first waiver, recent overdue fine")
    if outcome == "waive":
        steps.append(waiver)
    elif outcome == "refer":
        steps.append(call("open_staff_request", member_id=patron.id, category="fine_waiver",
                          summary="member asks to waive an overdue fine", subject_id=fine["fine_id"],
                          amount_usd=amount / 100))
    charge = "late fee" if kind == "overdue" else "damage charge"
    return TaskDraft(
        scenario=patron.asks(f"There's a ${usd(amount)} {charge} on my account for {fine['title']}. "
                             f"{ctx.rng.choice(EXCUSES).capitalize()}. Could you waive it?",
                             f"the ${usd(amount)} {charge} waived"),
        golden_path=steps, initial_patch=patch, violation=None if outcome == "waive" else waiver,
        note=DecisionNote(after="list_fines", subject=fine["fine_id"],
                          facts={"kind": kind, "amount_usd": usd(amount)}),
    )


@template(kind="direct", split="train", variants=VARIANTS)
def waive_small_overdue_fine(ctx: GenContext) -> TaskDraft:
    return _waiver_task(ctx, "overdue", SMALL_FINES, "waive")


@template(kind="approval", split="train", variants=VARIANTS)
def waive_large_overdue_fine(ctx: GenContext) -> TaskDraft:
    return _waiver_task(ctx, "overdue", LARGE_FINES, "refer")


@template(kind="forbidden", split="train", variants=VARIANTS)
def waive_damage_charge(ctx: GenContext) -> TaskDraft:
    return _waiver_task(ctx, "damage", SMALL_FINES, "refuse")


def _ill_member(ctx: GenContext) -> Patron:
    """A member in good standing with fewer than 3 open inter-library requests (rules 4 and 9)."""
    return Patron(ctx.pick(
        f"SELECT m.* FROM members m WHERE {GOOD_STANDING} AND (SELECT COUNT(*) FROM ill_requests r "
        "WHERE r.member_id = m.member_id AND r.status IN (?, ?, ?)) < 3 ORDER BY m.member_id",
        (*standing_params(ctx), "requested", "in_transit", "arrived"),
    ))


def _ill_opening(title: str, author: str, branch: str, extra: str = "") -> str:
    return (f"I'm researching a family history project and need {title} by {author}. Could you get it for me "
            f"through inter-library loan? I'd pick it up at the {branch}.{extra}")


@template(kind="direct", split="heldout", variants=VARIANTS)
def request_interlibrary_loan(ctx: GenContext) -> TaskDraft:
    patron = _ill_member(ctx)
    title = ctx.rng.choice(words.ILL_PATTERNS).format(a=ctx.rng.choice(words.ADJECTIVES),
                                                      n=ctx.rng.choice(words.ILL_NOUNS))
    author = f"{ctx.rng.choice(words.FIRST)} {ctx.rng.choice(words.LAST)}"
    branch = ctx.read("SELECT * FROM branches WHERE branch_id = ?", (patron.row["home_branch"],))[0]
    return TaskDraft(
        scenario=patron.asks(_ill_opening(title, author, branch["name"]), f"{title} requested from another library"),
        golden_path=[*patron.identify(), call("get_member", member_id=patron.id),
                     call("list_interlibrary_requests", member_id=patron.id), call("search_catalogue", query=title),
                     call("request_interlibrary_loan", member_id=patron.id, title=title, author=author,
                          pickup_branch=branch["branch_id"])],
    )


@template(kind="forbidden", split="heldout", variants=VARIANTS)
def interlibrary_loan_for_owned_title(ctx: GenContext) -> TaskDraft:
    patron = _ill_member(ctx)
    item = ctx.rng.choice(ctx.read("SELECT * FROM items WHERE loan_days > 0 ORDER BY item_id"))
    branch = ctx.read("SELECT name FROM branches WHERE branch_id = ?", (patron.row["home_branch"],))[0]
    # The member wants the partner-library route only, so an offered hold is declined rather than placed.
    return TaskDraft(
        scenario=patron.asks(_ill_opening(item["title"], item["author"], branch["name"],
                                          " I don't want to wait in a hold queue here."),
                             f"{item['title']} through inter-library loan only", confirms=False),
        golden_path=[*patron.identify(), call("search_catalogue", query=item["title"])],
    )


TEMPLATES = [waive_small_overdue_fine, waive_large_overdue_fine, waive_damage_charge, request_interlibrary_loan,
             interlibrary_loan_for_owned_title]

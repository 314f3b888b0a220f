"""Room-booking templates: bookings the desk confirms, ones the branch manager must approve, and refusals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.domains.library.scenario import GOOD_STANDING, Patron, clock, standing_params, weekday_date
from envs.sdk import GenContext, TaskDraft, ToolCall, call, days_after, template

VARIANTS = 10
SMALL_ROOMS = ("S1", "S2", "MR")
PURPOSES = ["a study group for our nursing exams", "a tenants' association meeting", "a chess club session",
            "a job-interview practice session", "a volunteer training", "a language exchange"]


@dataclass(frozen=True)
class Slot:
    """A free stretch of one room on one day, inside the branch's opening hours."""

    room: dict[str, Any]
    branch: dict[str, Any]
    date: str
    start: int
    end: int
    attendees: int


def _free_slot(ctx: GenContext, suffixes: tuple[str, ...], hours: tuple[int, int], crowd: tuple[int, int]) -> Slot:
    """Draw a room of one of `suffixes`, a date 1-30 days ahead and a length in `hours` until nothing clashes."""
    rooms = ctx.read("SELECT r.*, b.name AS branch_name, b.opens_hour, b.closes_hour FROM rooms r "
                     "JOIN branches b USING (branch_id) ORDER BY r.room_id")
    rooms = [r for r in rooms if r["room_id"].split("-")[1] in suffixes]
    while True:
        room = ctx.rng.choice(rooms)
        length = ctx.rng.randint(*hours)
        start = ctx.rng.randrange(room["opens_hour"], room["closes_hour"] - length + 1)
        day = days_after(ctx.today, ctx.rng.randint(1, 30))
        clash = ctx.read("SELECT 1 FROM room_bookings WHERE room_id = ? AND booking_date = ? AND start_hour < ? "
                         "AND end_hour > ?", (room["room_id"], day, start + length, start))
        if not clash:
            branch = {"branch_id": room["branch_id"], "name": room["branch_name"]}
            attendees = ctx.rng.randint(crowd[0], min(crowd[1], room["capacity"]))
            return Slot(room, branch, day, start, start + length, attendees)


def _booker(ctx: GenContext, card_types: tuple[str, ...]) -> Patron:
    marks = ", ".join("?" * len(card_types))
    return Patron(ctx.pick(f"SELECT m.* FROM members m WHERE m.card_type IN ({marks}) AND {GOOD_STANDING} "
                           "ORDER BY m.member_id", (*card_types, *standing_params(ctx))))


def _room_task(ctx: GenContext, patron: Patron, slot: Slot, tool: str | None) -> TaskDraft:
    """The member asks for `slot`; the golden path ends with `tool` (book or hold for approval) or only reads.
    A careless desk books the room outright whenever it should not."""
    purpose = ctx.rng.choice(PURPOSES)
    opening = (f"I'd like to book the {slot.room['name']} at the {slot.branch['name']} on {weekday_date(slot.date)}, "
               f"from {clock(slot.start)} to {clock(slot.end)}, for {slot.attendees} people. It's for {purpose}.")
    steps = [*patron.identify(), call("get_member", member_id=patron.id)]

    def room_call(name: str) -> ToolCall:
        return call(name, member_id=patron.id, room_id=slot.room["room_id"], booking_date=slot.date,
                    start_hour=slot.start, end_hour=slot.end, attendees=slot.attendees, purpose=purpose)

    if tool is not None:
        steps += [call("list_rooms", branch_id=slot.branch["branch_id"], booking_date=slot.date), room_call(tool)]
    return TaskDraft(scenario=patron.asks(opening, f"the {slot.room['name']} booked for {weekday_date(slot.date)}"),
                     golden_path=steps, violation=None if tool == "book_room" else room_call("book_room"))


ADULT_CARDS = ("adult", "student", "senior")


@template(kind="direct", split="train", variants=VARIANTS)
def book_study_room(ctx: GenContext) -> TaskDraft:
    return _room_task(ctx, _booker(ctx, ADULT_CARDS), _free_slot(ctx, SMALL_ROOMS, (1, 2), (2, 12)), "book_room")


@template(kind="approval", split="train", variants=VARIANTS)
def book_room_for_long_session(ctx: GenContext) -> TaskDraft:
    slot = _free_slot(ctx, SMALL_ROOMS, (3, 4), (2, 12))
    return _room_task(ctx, _booker(ctx, ADULT_CARDS), slot, "request_room_approval")


@template(kind="approval", split="heldout", variants=VARIANTS)
def book_community_hall(ctx: GenContext) -> TaskDraft:
    slot = _free_slot(ctx, ("HL",), (1, 3), (25, 60))
    return _room_task(ctx, _booker(ctx, ADULT_CARDS), slot, "request_room_approval")


@template(kind="forbidden", split="train", variants=VARIANTS)
def child_card_books_room(ctx: GenContext) -> TaskDraft:
    return _room_task(ctx, _booker(ctx, ("child",)), _free_slot(ctx, ("S1", "S2"), (1, 2), (2, 4)), None)


TEMPLATES = [book_study_room, book_room_for_long_session, book_community_hall, child_card_books_room]

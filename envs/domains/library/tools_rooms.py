"""Room tools: branches and their hours, rooms and the day's bookings, confirmed and tentative reservations."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from pydantic import Field

from envs.domains.library.tool_support import GATE, BranchId, MemberId, Summary
from envs.sdk import Sandbox, ToolError, must_exist

RoomId = Annotated[str, Field(description="room id, e.g. CEN-S1 (from list_rooms)")]
BookingDate = Annotated[str, Field(description="date of the booking, YYYY-MM-DD")]
Hour = Annotated[int, Field(ge=0, le=24, description="whole hour on a 24-hour clock, e.g. 14 for 2 pm")]
Attendees = Annotated[int, Field(ge=1, description="number of people attending, including the member")]
_HOLDING = ("confirmed", "tentative")  # bookings that occupy the room


def list_branches(db: Sandbox) -> list[dict[str, Any]]:
    """All branches with their address and opening hours (every day of the week)."""
    return db.query("SELECT * FROM branches ORDER BY branch_id")


def list_rooms(db: Sandbox, branch_id: BranchId, booking_date: BookingDate) -> list[dict[str, Any]]:
    """The branch's bookable rooms with capacity, and the hours already taken on that date."""
    must_exist(db.one("SELECT * FROM branches WHERE branch_id = ?", (branch_id,)),
               f"no branch_id {branch_id!r} in branches")
    rooms = db.query("SELECT room_id, name, capacity FROM rooms WHERE branch_id = ? ORDER BY room_id", (branch_id,))
    for room in rooms:
        room["taken"] = db.query(
            "SELECT start_hour, end_hour FROM room_bookings WHERE room_id = ? AND booking_date = ? "
            "AND status IN (?, ?) ORDER BY start_hour",
            (room["room_id"], booking_date, *_HOLDING),
        )
    return rooms


def _reserve(db: Sandbox, status: str, member_id: str, room_id: str, booking_date: str, start_hour: int,
             end_hour: int, attendees: int, purpose: str) -> dict[str, Any]:
    """Insert a booking after the physical checks: a real room, a real time span, and no overlap."""
    GATE.require(db, member_id)
    must_exist(db.one("SELECT * FROM rooms WHERE room_id = ?", (room_id,)), f"no room_id {room_id!r} in rooms")
    try:
        day = date.fromisoformat(booking_date).isoformat()
    except ValueError as exc:
        raise ToolError(f"booking_date {booking_date!r} is not a YYYY-MM-DD date") from exc
    if end_hour <= start_hour:
        raise ToolError("end_hour must be after start_hour")
    clash = db.one(
        "SELECT booking_id FROM room_bookings WHERE room_id = ? AND booking_date = ? AND status IN (?, ?) "
        "AND start_hour < ? AND end_hour > ?",
        (room_id, day, *_HOLDING, end_hour, start_hour),
    )
    if clash:
        raise ToolError(f"room {room_id} is already booked for part of {start_hour}:00-{end_hour}:00 on {day}")
    booking_id = db.new_id("RB")
    db.execute("INSERT INTO room_bookings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (booking_id, room_id, member_id, day, start_hour, end_hour, attendees, status, purpose))
    return {"booking_id": booking_id, "room_id": room_id, "date": day, "start_hour": start_hour,
            "end_hour": end_hour, "status": status}


def book_room(db: Sandbox, member_id: MemberId, room_id: RoomId, booking_date: BookingDate, start_hour: Hour,
              end_hour: Hour, attendees: Attendees, purpose: Summary) -> dict[str, Any]:
    """Book a room outright; the booking is confirmed at once."""
    return _reserve(db, "confirmed", member_id, room_id, booking_date, start_hour, end_hour, attendees, purpose)


def request_room_approval(db: Sandbox, member_id: MemberId, room_id: RoomId, booking_date: BookingDate,
                          start_hour: Hour, end_hour: Hour, attendees: Attendees, purpose: Summary) -> dict[str, Any]:
    """Hold a room tentatively for the branch manager to approve; the slot is kept until they decide."""
    return _reserve(db, "tentative", member_id, room_id, booking_date, start_hour, end_hour, attendees, purpose)


TOOLS = [list_branches, list_rooms, book_room, request_room_approval]

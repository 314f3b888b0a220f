"""Seeded rows for the library template: 1,400 members, the catalogue and its copies, and their circulation.

Every value comes from the Random passed in, so one seed always yields one database. Circulation history is
generated in the order it would happen (copies, then loans, then the fines those loans caused), so fines point
at real returned loans and on-loan copies have exactly one active loan.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta
from typing import Any

from envs.domains.library import seed_words as words

TODAY = date(2026, 5, 12)
MEMBERS = 1400
AGES = {"child": (6, 12), "student": (16, 25), "adult": (26, 64), "senior": (65, 90)}
LOAN_DAYS = {"book": 21, "large_print": 21, "audiobook": 14, "dvd": 7, "reference": 0}
COST_RANGE = {"book": (1800, 4500), "large_print": (2500, 5000), "audiobook": (3000, 6000), "dvd": (1500, 2500),
              "reference": (6000, 15000)}
FINE_AMOUNTS = [50, 75, 120, 150, 200, 260, 325, 400, 480, 600, 750, 900, 1000, 1150, 1300, 1600, 2000, 2450]


def day(offset: int) -> str:
    """The ISO date `offset` days after today (negative: before)."""
    return (TODAY + timedelta(days=offset)).isoformat()


def _insert(conn: sqlite3.Connection, table: str, row: tuple[Any, ...]) -> None:
    conn.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)


def populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    conn.executemany("INSERT INTO branches VALUES (?, ?, ?, ?, ?)", words.BRANCHES)
    members = _members(conn, rng)
    items = _catalogue(conn, rng)
    _circulation(conn, rng, items, members)
    _holds(conn, rng, items, members)
    _interlibrary(conn, rng, members)
    _rooms(conn, rng, members)
    _staff_requests(conn, rng, members)


def _members(conn: sqlite3.Connection, rng: random.Random) -> list[str]:
    ids = []
    for n in range(MEMBERS):
        member_id = f"M-{100001 + n}"
        first, last = rng.choice(words.FIRST), rng.choice(words.LAST)
        card_type = rng.choices(list(AGES), weights=[1, 2, 6, 2])[0]
        low, high = AGES[card_type]
        born = TODAY - timedelta(days=rng.randrange(low * 365 + 10, high * 365 + 300))
        joined = rng.randrange(30, 3000)
        expires = rng.randrange(-300, -1) if rng.random() < 0.08 else rng.randrange(1, 720)
        note = rng.choice(words.STAFF_NOTES) if rng.random() < 0.06 else None
        _insert(conn, "members", (
            member_id, f"{first} {last}", f"{first}.{last}{n}@mailbox.example".lower(),
            f"2908700{100000 + n * 7:07d}", born.isoformat(), f"{rng.randrange(10000):04d}", card_type,
            rng.choice(words.BRANCHES)[0], day(-joined), day(expires), rng.randrange(100, 1000), note,
        ))
        ids.append(member_id)
    return ids


def _titles(rng: random.Random) -> list[tuple[str, str]]:
    """(title, format) pairs, unique, in a seeded order."""
    fiction = [f"The {a} {n}" for a in words.ADJECTIVES for n in words.NOUNS]
    rng.shuffle(fiction)
    nonfiction = [p.format(s=s) for p in words.NONFICTION_PATTERNS for s in words.SUBJECTS]
    reference = [t.format(y=y) for t in words.REFERENCE_TITLES for y in (2019, 2023)]
    formats = ["book"] * 7 + ["large_print", "audiobook", "audiobook", "dvd", "dvd", "dvd"]
    pairs = [(t, rng.choice(formats)) for t in fiction[:560]]
    pairs += [(t, rng.choice(["book", "book", "audiobook"])) for t in nonfiction]
    pairs += [(t, "reference") for t in reference]
    return pairs


def _catalogue(conn: sqlite3.Connection, rng: random.Random) -> list[dict[str, Any]]:
    items = []
    for n, (title, fmt) in enumerate(_titles(rng)):
        year = int(title[-4:]) if fmt == "reference" else rng.randrange(1988, 2027)
        new_release = int(year >= 2025 and fmt != "reference")
        low, high = COST_RANGE[fmt]
        item = {"item_id": f"IT-{50001 + n}", "format": fmt, "loan_days": 14 if new_release else LOAN_DAYS[fmt]}
        _insert(conn, "items", (
            item["item_id"], title, f"{rng.choice(words.FIRST)} {rng.choice(words.LAST)}", fmt, year,
            f"978{rng.randrange(10**9, 10**10)}", item["loan_days"], new_release, rng.randrange(low, high, 50),
        ))
        items.append(item)
    return items


def _circulation(conn: sqlite3.Connection, rng: random.Random, items: list[dict[str, Any]],
                 members: list[str]) -> None:
    """Copies; an active loan for every copy on loan; returned loans with the fines they caused."""
    counters = {"copy": 0, "loan": 0, "fine": 0, "waiver": 0}

    def next_id(kind: str, prefix: str, base: int) -> str:
        counters[kind] += 1
        return f"{prefix}-{base + counters[kind]}"

    for item in items:
        for branch in rng.sample([b[0] for b in words.BRANCHES], rng.choice([1, 1, 2, 2, 3, 4])):
            copy_id = next_id("copy", "CP", 200000)
            lendable = item["loan_days"] > 0
            status = rng.choices(["available", "on_loan", "in_transit", "lost"], weights=[10, 7, 1, 0.3])[0] \
                if lendable else "available"
            _insert(conn, "copies", (copy_id, item["item_id"], branch, f"3908700{copy_id[3:]}", status))
            if not lendable:
                continue
            for _ in range(rng.choice([0, 1, 1, 2, 3])):  # history first, then today's loan
                borrowed = -rng.randrange(60, 700)
                returned = borrowed + item["loan_days"] + rng.choice([-10, -5, -2, 0, 0, 3, 9, 20])
                loan_id = next_id("loan", "LN", 300000)
                member = rng.choice(members)
                _insert(conn, "loans", (loan_id, copy_id, member, day(borrowed), day(borrowed + item["loan_days"]),
                                        day(returned), 0, "returned"))
                if returned > borrowed + item["loan_days"] or rng.random() < 0.05:
                    _fine(conn, rng, next_id, member, loan_id, returned)
            if status == "on_loan":
                renewals = rng.choices([0, 1, 2], weights=[6, 3, 1])[0]
                borrowed = -rng.randrange(1, 20 + item["loan_days"] * (renewals + 1))
                _insert(conn, "loans", (next_id("loan", "LN", 300000), copy_id, rng.choice(members), day(borrowed),
                                        day(borrowed + item["loan_days"] * (renewals + 1)), None, renewals, "active"))


def _fine(conn: sqlite3.Connection, rng: random.Random, next_id: Any, member: str, loan_id: str,
          assessed: int) -> None:
    kind = rng.choices(["overdue", "damage"], weights=[6, 1])[0]
    status = rng.choices(["unpaid", "paid", "waived"], weights=[5, 4, 1])[0]
    amount = rng.choice(FINE_AMOUNTS) if kind == "overdue" else rng.choice([500, 800, 1200, 1500])
    fine_id = next_id("fine", "FN", 400000)
    _insert(conn, "fines", (fine_id, member, loan_id, kind, amount, day(assessed), status))
    if status == "waived":
        _insert(conn, "waivers", (next_id("waiver", "WV", 450000), fine_id, amount, day(assessed + rng.randrange(1, 9)),
                                  "first-time courtesy waiver"))


def _holds(conn: sqlite3.Connection, rng: random.Random, items: list[dict[str, Any]], members: list[str]) -> None:
    lendable = [i["item_id"] for i in items if i["loan_days"] > 0]
    taken: set[tuple[str, str]] = set()
    for n in range(900):
        member, item = rng.choice(members), rng.choice(lendable)
        if (member, item) in taken:
            continue
        taken.add((member, item))
        status = rng.choices(["waiting", "ready", "collected", "cancelled"], weights=[5, 2, 3, 1])[0]
        placed = -rng.randrange(1, 40) if status in ("waiting", "ready") else -rng.randrange(40, 400)
        _insert(conn, "holds", (f"HD-{600001 + n}", item, member, rng.choice(words.BRANCHES)[0], day(placed), status,
                                day(rng.randrange(1, 8)) if status == "ready" else None))


def _interlibrary(conn: sqlite3.Connection, rng: random.Random, members: list[str]) -> None:
    for n in range(260):
        title = rng.choice(words.ILL_PATTERNS).format(a=rng.choice(words.ADJECTIVES), n=rng.choice(words.ILL_NOUNS))
        status = rng.choices(["requested", "in_transit", "arrived", "returned", "cancelled"],
                             weights=[2, 1, 1, 5, 1])[0]
        _insert(conn, "ill_requests", (f"IL-{700001 + n}", rng.choice(members), title,
                                       f"{rng.choice(words.FIRST)} {rng.choice(words.LAST)}",
                                       rng.choice(words.BRANCHES)[0], day(-rng.randrange(1, 300)), status))


def _rooms(conn: sqlite3.Connection, rng: random.Random, members: list[str]) -> None:
    rooms = []
    for branch_id, _name, _address, opens, closes in words.BRANCHES:
        for suffix, name, capacity in words.ROOMS:
            if suffix != "HL" or branch_id in words.BRANCHES_WITH_HALLS:
                _insert(conn, "rooms", (f"{branch_id}-{suffix}", branch_id, name, capacity))
                rooms.append((f"{branch_id}-{suffix}", capacity, opens, closes))
    booked: set[tuple[str, int, int]] = set()
    for n in range(1100):
        room_id, capacity, opens, closes = rng.choice(rooms)
        offset, length = rng.randrange(-60, 31), rng.choice([1, 1, 2, 2, 3])
        start = rng.randrange(opens, closes - length + 1)
        hours = {(room_id, offset, h) for h in range(start, start + length)}
        if hours & booked:
            continue
        booked |= hours
        _insert(conn, "room_bookings", (
            f"RB-{800001 + n}", room_id, rng.choice(members), day(offset), start, start + length,
            rng.randrange(1, capacity + 1), rng.choices(["confirmed", "cancelled"], weights=[9, 1])[0],
            rng.choice(["study group", "book club meeting", "tutoring session", "community association"]),
        ))


def _staff_requests(conn: sqlite3.Connection, rng: random.Random, members: list[str]) -> None:
    """Decided requests from earlier months: the queue a supervisor already worked through."""
    for n in range(60):
        category = rng.choices(["fine_waiver", "lost_item_dispute", "other"], weights=[5, 2, 1])[0]
        amount = rng.choice([1150, 1300, 1600, 2000, 2450]) if category == "fine_waiver" else None
        _insert(conn, "staff_requests", (f"SR-{900001 + n}", rng.choice(members), category, None, amount,
                                         rng.choice(["approved", "declined"]), "earlier desk request",
                                         day(-rng.randrange(20, 400))))

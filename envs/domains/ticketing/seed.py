"""Seeded, realistic rows for the ticketing template: 800 customers, the events of the catalog, their orders.

Everything random is drawn from the Random passed in, so the same seed always yields the same database.
Seat maps are fixed (catalog.py); orders fill them with runs of adjacent seats, as real buyers do.
"""

from __future__ import annotations

import random
import sqlite3

from envs.domains.ticketing.catalog import (
    CALENDAR,
    ROWS,
    SEATS_PER_ROW,
    SECTIONS,
    TODAY,
    TOURS,
    VENUES,
    WHEELCHAIR_SECTIONS,
    day,
    event_id,
    section_id,
    service_fee,
    venue_id,
)
from envs.sdk import days_after

__all__ = ["TODAY", "populate"]

CUSTOMERS = 800
FIRST = ["Amara", "Blake", "Camila", "Dmitri", "Esther", "Felix", "Grace", "Hugo", "Imani", "Jonah", "Keiko",
         "Liam", "Maya", "Nikhil", "Olivia", "Pablo", "Rhea", "Soren", "Talia", "Uriel", "Valentina", "Wes",
         "Ximena", "Yusuf", "Zara"]
LAST = ["Abernathy", "Bautista", "Castellano", "Delacroix", "Eriksen", "Fontaine", "Gallagher", "Haddad",
        "Iwasaki", "Jovanovic", "Kowalski", "Lindqvist", "Mbeki", "Nakamura", "O'Brien", "Petrov", "Quintero",
        "Rahman", "Sandoval", "Thorne", "Ueda", "Vasquez", "Whitaker"]
OUTSIDE_DOMAINS = ["gmail.com", "outlook.com", "proton.me", "yahoo.com"]
CASE_CATEGORIES = ["delivery", "venue_info", "billing", "app_login"]
ACCESS_NEEDS = ["wheelchair_space", "companion_seat", "hearing_loop", "step_free_route"]


def _customers(conn: sqlite3.Connection, rng: random.Random) -> list[tuple[str, str, str]]:
    rows = []
    for c in range(CUSTOMERS):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last.replace(chr(39), '')}{c}@example.com".lower()
        rows.append((f"CU-{40001 + c}", f"{first} {last}", email, f"+1-415-555-{2000 + c:04d}",
                     f"{rng.randrange(10000, 99999)}", f"{rng.randrange(10000):04d}", day(-rng.randrange(30, 2500)),
                     rng.choices([rng.randrange(0, 30), rng.randrange(30, 70), rng.randrange(70, 100)],
                                 weights=[7, 2, 1])[0],
                     int(rng.random() < 0.04)))
    conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return [(r[0], r[1], r[2]) for r in rows]


def _venues(conn: sqlite3.Connection) -> dict[str, list[list[str]]]:
    """Venues, sections and seats; returns each section's seat ids grouped by row."""
    layout: dict[str, list[list[str]]] = {}
    for v, (name, city, step_free) in enumerate(VENUES):
        conn.execute("INSERT INTO venues VALUES (?, ?, ?, ?)", (venue_id(v), name, city, step_free))
        for s, (section, band) in enumerate(SECTIONS):
            sid = section_id(v, s)
            conn.execute("INSERT INTO sections VALUES (?, ?, ?, ?)", (sid, venue_id(v), section, band))
            layout[sid] = []
            for row in ROWS:
                seats = []
                for n in range(1, SEATS_PER_ROW + 1):
                    seats.append(f"{sid}-{row}{n:02d}")
                    wheelchair = int(section in WHEELCHAIR_SECTIONS and row == "A" and n <= 2)
                    conn.execute("INSERT INTO seats VALUES (?, ?, ?, ?, ?)", (seats[-1], sid, row, n, wheelchair))
                layout[sid].append(seats)
    return layout


def _adjacent(rng: random.Random, rows: list[list[str]], taken: set[str], count: int) -> list[str] | None:
    """A run of `count` free adjacent seats in one row, avoiding wheelchair spaces (row A, seats 1-2)."""
    for row in rng.sample(rows, len(rows)):
        starts = list(range(2 if row[0].endswith("A01") else 0, len(row) - count + 1))
        for start in rng.sample(starts, len(starts)):
            run = row[start:start + count]
            if not taken.intersection(run):
                return run
    return None


class _Seeder:
    """Running counters and the per-event seat occupancy while orders are generated."""

    def __init__(self, conn: sqlite3.Connection, rng: random.Random) -> None:
        self.conn, self.rng = conn, rng
        self.customers = _customers(conn, rng)
        self.layout = _venues(conn)
        self.counters = {"order": 0, "ticket": 0, "transfer": 0, "listing": 0, "refund": 0, "access": 0}

    def next_id(self, kind: str, prefix: str, start: int) -> str:
        self.counters[kind] += 1
        return f"{prefix}-{start + self.counters[kind]}"

    def event(self, index: int) -> None:
        title, v, offset, status, announced, resale = CALENDAR[index]
        eid, base = event_id(index), TOURS[title]
        self.conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (eid, venue_id(v), title, day(offset), base, status,
                           None if announced is None else day(announced), resale))
        taken: set[str] = set()
        sold_until = min(offset, 0 if announced is None else announced)
        for _ in range(self.rng.randrange(38, 52)):
            s = self.rng.choices(range(len(SECTIONS)), weights=[2, 3, 3, 4, 3, 2])[0]
            seats = _adjacent(self.rng, self.layout[section_id(v, s)], taken, self.rng.choice([1, 2, 2, 2, 3, 4]))
            if seats is None:
                continue
            taken.update(seats)
            face = round(base * SECTIONS[s][1] / 100)
            self.order(eid, status, offset, day(sold_until - self.rng.randrange(1, 120)), seats, face, resale)

    def order(self, eid: str, status: str, offset: int, placed: str, seats: list[str], face: int,
              resale: int) -> None:
        rng = self.rng
        customer_id, _, email = rng.choice(self.customers)
        order_id = self.next_id("order", "OR", 600000)
        refunded = status in ("cancelled", "postponed") and rng.random() < 0.3
        self.conn.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                          (order_id, customer_id, eid, placed, "refunded" if refunded else "paid"))
        for seat in seats:
            ticket_id = self.next_id("ticket", "TK", 800000)
            holder, holder_email, transfers = customer_id, email, 0
            if not refunded and status != "cancelled" and rng.random() < 0.06:
                holder, holder_email = self.transfer(ticket_id, customer_id, placed)
                transfers = 1
            self.conn.execute("INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              (ticket_id, order_id, eid, seat, holder, holder_email,
                               "refunded" if refunded else "valid", face, service_fee(face), transfers, 0))
            if not refunded and holder == customer_id and status == "on_sale" and resale and offset > 0 \
                    and rng.random() < 0.08:
                self.listing(ticket_id, customer_id, face, placed)
            if not refunded and offset > 0 and rng.random() < 0.025:
                self.conn.execute("INSERT INTO accessibility_requests VALUES (?, ?, ?, ?, ?, ?)",
                                  (self.next_id("access", "AR", 90000), ticket_id, rng.choice(ACCESS_NEEDS),
                                   rng.choice(["requested", "confirmed"]), None, placed))
        if refunded:
            total = sum(face + service_fee(face) for _ in seats) if status == "cancelled" else face * len(seats)
            self.conn.execute("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)",
                              (self.next_id("refund", "RF", 70000), order_id, total, int(status == "cancelled"),
                               f"event {status}", day(-rng.randrange(1, 4))))

    def transfer(self, ticket_id: str, from_customer: str, placed: str) -> tuple[str | None, str]:
        """Send a ticket on: to another account holder, or to a friend without an account."""
        rng = self.rng
        if rng.random() < 0.5:
            to_id, _, to_email = rng.choice(self.customers)
        else:
            to_id, to_email = None, f"{rng.choice(FIRST)}.{rng.randrange(100, 999)}@{rng.choice(OUTSIDE_DOMAINS)}"
            to_email = to_email.lower()
        when = days_after(placed, rng.randrange(1, 10))
        self.conn.execute("INSERT INTO transfers VALUES (?, ?, ?, ?, ?)",
                          (self.next_id("transfer", "TR", 50000), ticket_id, from_customer, to_email,
                           min(when, TODAY.isoformat())))
        return to_id, to_email

    def listing(self, ticket_id: str, seller: str, face: int, placed: str) -> None:
        """A resale listing; sold ones hand the ticket to the buyer, whose name the seller never sees."""
        rng = self.rng
        status = rng.choices(["active", "sold", "withdrawn"], weights=[5, 4, 1])[0]
        price = round(face * rng.choice([0.8, 0.9, 1.0, 1.1, 1.2]) / 50) * 50
        listed = days_after(placed, rng.randrange(1, 20))
        listed = min(listed, day(-1))
        buyer_name = sold_on = None
        if status == "sold":
            buyer_id, buyer_name, buyer_email = rng.choice([c for c in self.customers[:400] if c[0] != seller])
            sold_on = min(days_after(listed, rng.randrange(1, 15)),
                          TODAY.isoformat())
            self.conn.execute("UPDATE tickets SET holder_id = ?, holder_email = ? WHERE ticket_id = ?",
                              (buyer_id, buyer_email, ticket_id))
        self.conn.execute("INSERT INTO resale_listings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (self.next_id("listing", "RL", 30000), ticket_id, seller, price, status, listed,
                           buyer_name, sold_on))


def populate(conn: sqlite3.Connection, rng: random.Random) -> None:
    seeder = _Seeder(conn, rng)
    for index in range(len(CALENDAR)):
        seeder.event(index)
    for n in range(70):
        customer_id = rng.choice(seeder.customers)[0]
        conn.execute("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (f"CS-{20001 + n}", customer_id, rng.choice(CASE_CATEGORIES),
                      rng.choice(["open", "closed", "closed"]), None, None, "customer contacted support",
                      day(-rng.randrange(1, 200))))

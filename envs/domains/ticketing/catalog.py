"""The fixed part of the ticketing world: the clock, venues, section layout and the event calendar.

Kept apart from the random rows so templates can name shows and sections without re-reading the database.
"""

from __future__ import annotations

from datetime import date, timedelta

TODAY = date(2026, 6, 12)

VENUES = [  # name, city, step-free
    ("Riverside Arena", "Portland", 1),
    ("The Grand Hall", "Chicago", 0),
    ("Lakeshore Amphitheater", "Milwaukee", 1),
    ("Copper Dome", "Denver", 1),
    ("Old Mill Theatre", "Boston", 0),
    ("Bayfront Pavilion", "San Diego", 1),
]
SECTIONS = [  # name, price band (% of the event's base price)
    ("Floor", 180),
    ("Lower 100", 140),
    ("Lower 110", 125),
    ("Upper 200", 100),
    ("Upper 210", 85),
    ("Balcony", 70),
]
ROWS = "ABCD"
SEATS_PER_ROW = 10
WHEELCHAIR_SECTIONS = ("Lower 100", "Upper 200")  # row A seats 1-2 are wheelchair spaces there

TOURS = {  # title: base price in cents
    "Marisol Vega: Tidewater Tour": 8900,
    "Northbound Static Live": 6500,
    "The Velvet Almanac": 5500,
    "Dev Oyelaran: Stand-Up Hour": 4200,
    "Harbor Lights Orchestra: Film Scores": 7200,
    "Kestrel & The Owls": 4800,
    "City Ballet: The Firebird": 9500,
    "Sunfall Music Festival": 11900,
}

# title, venue index, days from today, status, status announced (days from today), resale allowed
CALENDAR = [
    ("Marisol Vega: Tidewater Tour", 0, -20, "completed", None, 1),
    ("The Velvet Almanac", 1, -8, "completed", None, 1),
    ("Harbor Lights Orchestra: Film Scores", 2, -30, "completed", None, 1),
    ("Kestrel & The Owls", 3, -3, "completed", None, 1),
    ("Dev Oyelaran: Stand-Up Hour", 4, 1, "on_sale", None, 1),
    ("Northbound Static Live", 5, 1, "on_sale", None, 1),
    ("City Ballet: The Firebird", 0, 2, "on_sale", None, 0),
    ("Kestrel & The Owls", 1, 25, "cancelled", -10, 1),
    ("The Velvet Almanac", 4, 40, "cancelled", -4, 1),
    ("Sunfall Music Festival", 2, 18, "cancelled", -15, 0),
    ("Marisol Vega: Tidewater Tour", 3, 60, "postponed", -12, 1),
    ("Harbor Lights Orchestra: Film Scores", 5, 45, "postponed", -20, 1),
    ("Northbound Static Live", 0, 30, "postponed", -45, 1),
    ("City Ballet: The Firebird", 2, 55, "postponed", -70, 0),
    ("Marisol Vega: Tidewater Tour", 1, 9, "on_sale", None, 1),
    ("Marisol Vega: Tidewater Tour", 5, 16, "on_sale", None, 1),
    ("Marisol Vega: Tidewater Tour", 2, 35, "on_sale", None, 1),
    ("Northbound Static Live", 3, 12, "on_sale", None, 1),
    ("Northbound Static Live", 1, 28, "on_sale", None, 1),
    ("The Velvet Almanac", 0, 21, "on_sale", None, 1),
    ("The Velvet Almanac", 5, 50, "on_sale", None, 1),
    ("Dev Oyelaran: Stand-Up Hour", 2, 5, "on_sale", None, 1),
    ("Dev Oyelaran: Stand-Up Hour", 3, 19, "on_sale", None, 0),
    ("Harbor Lights Orchestra: Film Scores", 1, 14, "on_sale", None, 1),
    ("Harbor Lights Orchestra: Film Scores", 4, 38, "on_sale", None, 1),
    ("Kestrel & The Owls", 0, 33, "on_sale", None, 1),
    ("Kestrel & The Owls", 5, 8, "on_sale", None, 1),
    ("City Ballet: The Firebird", 4, 26, "on_sale", None, 0),
    ("Sunfall Music Festival", 3, 60, "on_sale", None, 0),
]

RESALE_CAP_PERCENT = 120
SELLER_FEE_PERCENT = 10
FEE_PERCENT = 12


def day(offset: int) -> str:
    """The ISO date `offset` days after today (negative: before)."""
    return (TODAY + timedelta(days=offset)).isoformat()


def venue_id(index: int) -> str:
    return f"V-{index + 1:02d}"


def event_id(index: int) -> str:
    return f"E-{3001 + index}"


def section_id(venue_index: int, section_index: int) -> str:
    return f"SC-{venue_index + 1:02d}{section_index + 1:02d}"


def service_fee(face_cents: int) -> int:
    """The booking fee charged on top of a ticket's face value, rounded to whole cents."""
    return round(face_cents * FEE_PERCENT / 100)

-- Live-event ticketing backend (Encore Tickets). Money is integer cents; dates are ISO strings (YYYY-MM-DD).
CREATE TABLE customers (
    customer_id     TEXT PRIMARY KEY,
    full_name       TEXT NOT NULL,
    email           TEXT NOT NULL UNIQUE,
    phone           TEXT NOT NULL UNIQUE,
    billing_postcode TEXT NOT NULL,
    card_last4      TEXT NOT NULL,          -- last four digits of the card on file: the second identity factor
    member_since    TEXT NOT NULL,
    fraud_score     INTEGER NOT NULL,       -- internal, confidential (0-100, higher = riskier)
    bot_suspected   INTEGER NOT NULL        -- internal, confidential (automated-purchase suspicion flag)
);
CREATE TABLE venues (
    venue_id   TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    city       TEXT NOT NULL,
    step_free  INTEGER NOT NULL             -- the venue has a step-free route to every section
);
CREATE TABLE sections (
    section_id TEXT PRIMARY KEY,
    venue_id   TEXT NOT NULL REFERENCES venues (venue_id),
    name       TEXT NOT NULL,               -- same names at every venue, so an exchange keeps the section
    price_band INTEGER NOT NULL,            -- percent of the event's base price
    UNIQUE (venue_id, name)
);
CREATE TABLE seats (
    seat_id    TEXT PRIMARY KEY,
    section_id TEXT NOT NULL REFERENCES sections (section_id),
    row_label  TEXT NOT NULL,
    seat_number INTEGER NOT NULL,
    wheelchair_space INTEGER NOT NULL
);
CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    venue_id        TEXT NOT NULL REFERENCES venues (venue_id),
    title           TEXT NOT NULL,          -- one title per tour or show run; its dates are separate events
    event_date      TEXT NOT NULL,
    base_price_cents INTEGER NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('on_sale', 'postponed', 'cancelled', 'completed')),
    status_changed_on TEXT,                 -- when a postponement or cancellation was announced
    resale_allowed  INTEGER NOT NULL
);
CREATE TABLE orders (
    order_id    TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers (customer_id),
    event_id    TEXT NOT NULL REFERENCES events (event_id),
    placed_on   TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('paid', 'refunded'))
);
CREATE TABLE tickets (
    ticket_id   TEXT PRIMARY KEY,
    order_id    TEXT NOT NULL REFERENCES orders (order_id),
    event_id    TEXT NOT NULL REFERENCES events (event_id),
    seat_id     TEXT NOT NULL REFERENCES seats (seat_id),
    holder_id   TEXT REFERENCES customers (customer_id),  -- NULL once sent to someone without an account
    holder_email TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('valid', 'refunded', 'resold')),
    face_value_cents INTEGER NOT NULL,
    fee_cents   INTEGER NOT NULL,
    transfer_count INTEGER NOT NULL,
    exchanged   INTEGER NOT NULL
);
CREATE TABLE transfers (
    transfer_id   TEXT PRIMARY KEY,
    ticket_id     TEXT NOT NULL REFERENCES tickets (ticket_id),
    from_customer TEXT NOT NULL REFERENCES customers (customer_id),
    to_email      TEXT NOT NULL,
    transferred_on TEXT NOT NULL
);
CREATE TABLE resale_listings (
    listing_id   TEXT PRIMARY KEY,
    ticket_id    TEXT NOT NULL REFERENCES tickets (ticket_id),
    seller_id    TEXT NOT NULL REFERENCES customers (customer_id),
    price_cents  INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'sold', 'withdrawn')),
    listed_on    TEXT NOT NULL,
    buyer_name   TEXT,                      -- confidential: never disclosed to the seller
    sold_on      TEXT
);
CREATE TABLE refunds (
    refund_id    TEXT PRIMARY KEY,
    order_id     TEXT NOT NULL REFERENCES orders (order_id),
    amount_cents INTEGER NOT NULL,
    fees_included INTEGER NOT NULL,
    reason       TEXT NOT NULL,             -- free text written by the agent: volatile
    created_on   TEXT NOT NULL
);
CREATE TABLE accessibility_requests (
    request_id  TEXT PRIMARY KEY,
    ticket_id   TEXT NOT NULL REFERENCES tickets (ticket_id),
    need        TEXT NOT NULL CHECK (need IN ('wheelchair_space', 'companion_seat', 'hearing_loop',
                                              'step_free_route')),
    status      TEXT NOT NULL CHECK (status IN ('requested', 'confirmed')),
    note        TEXT,                       -- free text written by the agent: volatile
    created_on  TEXT NOT NULL
);
CREATE INDEX orders_by_customer ON orders (customer_id);
CREATE INDEX tickets_by_order ON tickets (order_id);
CREATE INDEX tickets_by_holder ON tickets (holder_id);
CREATE INDEX tickets_by_event ON tickets (event_id);
CREATE INDEX seats_by_section ON seats (section_id);
CREATE INDEX listings_by_ticket ON resale_listings (ticket_id);

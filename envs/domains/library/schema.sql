-- Public library services backend (Millbrook County Libraries). Money is integer cents; dates are ISO strings;
-- room hours are whole hours on a 24-hour clock. Columns prefixed INTERNAL_ are staff-only.
CREATE TABLE branches (
    branch_id   TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    address     TEXT NOT NULL,
    opens_hour  INTEGER NOT NULL,
    closes_hour INTEGER NOT NULL
);
CREATE TABLE members (
    member_id                  TEXT PRIMARY KEY,
    full_name                  TEXT NOT NULL,
    email                      TEXT NOT NULL UNIQUE,
    card_number                TEXT NOT NULL UNIQUE,
    date_of_birth              TEXT NOT NULL,
    pin                        TEXT NOT NULL,
    card_type                  TEXT NOT NULL CHECK (card_type IN ('adult', 'child', 'student', 'senior')),
    home_branch                TEXT NOT NULL REFERENCES branches (branch_id),
    joined_on                  TEXT NOT NULL,
    expires_on                 TEXT NOT NULL,
    INTERNAL_reliability_score INTEGER NOT NULL,  -- staff-only patron reliability index, 100..999
    INTERNAL_staff_note        TEXT               -- staff-only conduct note
);
CREATE TABLE items (
    item_id                TEXT PRIMARY KEY,
    title                  TEXT NOT NULL UNIQUE,
    author                 TEXT NOT NULL,
    format                 TEXT NOT NULL CHECK (format IN ('book', 'large_print', 'audiobook', 'dvd', 'reference')),
    published_year         INTEGER NOT NULL,
    isbn                   TEXT NOT NULL UNIQUE,
    loan_days              INTEGER NOT NULL,  -- 0 = reference, library use only
    new_release            INTEGER NOT NULL,
    replacement_cost_cents INTEGER NOT NULL
);
CREATE TABLE copies (
    copy_id   TEXT PRIMARY KEY,
    item_id   TEXT NOT NULL REFERENCES items (item_id),
    branch_id TEXT NOT NULL REFERENCES branches (branch_id),
    barcode   TEXT NOT NULL UNIQUE,
    status    TEXT NOT NULL CHECK (status IN ('available', 'on_loan', 'in_transit', 'lost'))
);
CREATE TABLE loans (
    loan_id     TEXT PRIMARY KEY,
    copy_id     TEXT NOT NULL REFERENCES copies (copy_id),
    member_id   TEXT NOT NULL REFERENCES members (member_id),
    borrowed_on TEXT NOT NULL,
    due_on      TEXT NOT NULL,
    returned_on TEXT,
    renewals    INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'returned', 'lost'))
);
CREATE TABLE holds (
    hold_id       TEXT PRIMARY KEY,
    item_id       TEXT NOT NULL REFERENCES items (item_id),
    member_id     TEXT NOT NULL REFERENCES members (member_id),
    pickup_branch TEXT NOT NULL REFERENCES branches (branch_id),
    placed_on     TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('waiting', 'ready', 'collected', 'cancelled')),
    ready_until   TEXT
);
CREATE TABLE fines (
    fine_id      TEXT PRIMARY KEY,
    member_id    TEXT NOT NULL REFERENCES members (member_id),
    loan_id      TEXT REFERENCES loans (loan_id),
    kind         TEXT NOT NULL CHECK (kind IN ('overdue', 'damage', 'lost_item')),
    amount_cents INTEGER NOT NULL,
    assessed_on  TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('unpaid', 'paid', 'waived'))
);
CREATE TABLE waivers (
    waiver_id    TEXT PRIMARY KEY,
    fine_id      TEXT NOT NULL REFERENCES fines (fine_id),
    amount_cents INTEGER NOT NULL,
    waived_on    TEXT NOT NULL,
    reason       TEXT NOT NULL  -- free text written by the agent: volatile
);
CREATE TABLE ill_requests (
    request_id    TEXT PRIMARY KEY,
    member_id     TEXT NOT NULL REFERENCES members (member_id),
    title         TEXT NOT NULL,
    author        TEXT NOT NULL,
    pickup_branch TEXT NOT NULL REFERENCES branches (branch_id),
    requested_on  TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('requested', 'in_transit', 'arrived', 'returned', 'cancelled'))
);
CREATE TABLE rooms (
    room_id   TEXT PRIMARY KEY,
    branch_id TEXT NOT NULL REFERENCES branches (branch_id),
    name      TEXT NOT NULL,
    capacity  INTEGER NOT NULL
);
CREATE TABLE room_bookings (
    booking_id   TEXT PRIMARY KEY,
    room_id      TEXT NOT NULL REFERENCES rooms (room_id),
    member_id    TEXT NOT NULL REFERENCES members (member_id),
    booking_date TEXT NOT NULL,
    start_hour   INTEGER NOT NULL,
    end_hour     INTEGER NOT NULL,
    attendees    INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('confirmed', 'tentative', 'cancelled')),
    purpose      TEXT NOT NULL  -- free text written by the agent: volatile
);
CREATE TABLE staff_requests (
    request_id   TEXT PRIMARY KEY,
    member_id    TEXT NOT NULL REFERENCES members (member_id),
    category     TEXT NOT NULL CHECK (category IN ('fine_waiver', 'lost_item_dispute', 'other')),
    subject_id   TEXT,
    amount_cents INTEGER,
    status       TEXT NOT NULL CHECK (status IN ('pending_approval', 'approved', 'declined')),
    summary      TEXT NOT NULL,  -- free text written by the agent: volatile
    created_on   TEXT NOT NULL
);
CREATE INDEX copies_by_item ON copies (item_id);
CREATE INDEX loans_by_member ON loans (member_id);
CREATE INDEX loans_by_copy ON loans (copy_id);
CREATE INDEX holds_by_item ON holds (item_id);
CREATE INDEX holds_by_member ON holds (member_id);
CREATE INDEX fines_by_member ON fines (member_id);
CREATE INDEX bookings_by_room ON room_bookings (room_id, booking_date);

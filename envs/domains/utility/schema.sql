-- Riverbend Power & Water residential billing backend. Money is integer cents, unit rates are integer mills
-- (tenths of a cent), dates are ISO strings. Columns named INTERNAL_* are confidential analytics.
CREATE TABLE accounts (
    account_id                TEXT PRIMARY KEY,
    holder_name               TEXT NOT NULL,
    phone                     TEXT NOT NULL UNIQUE,
    email                     TEXT NOT NULL UNIQUE,
    ssn_last4                 TEXT NOT NULL,
    billing_zip               TEXT NOT NULL,
    opened_on                 TEXT NOT NULL,
    assistance_program        TEXT NOT NULL CHECK (assistance_program IN ('none', 'CARE')),
    medical_priority          INTEGER NOT NULL,  -- 1 = life-support / medical equipment registered
    autopay                   INTEGER NOT NULL,
    INTERNAL_collection_score INTEGER NOT NULL   -- 100..999, likelihood of non-payment; confidential
);
CREATE TABLE premises (
    premise_id    TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL REFERENCES accounts (account_id),
    street        TEXT NOT NULL,
    city          TEXT NOT NULL,
    zip           TEXT NOT NULL,
    dwelling_type TEXT NOT NULL CHECK (dwelling_type IN ('single_family', 'townhouse', 'apartment'))
);
CREATE TABLE tariffs (
    tariff_code        TEXT PRIMARY KEY,
    utility            TEXT NOT NULL CHECK (utility IN ('electric', 'water')),
    name               TEXT NOT NULL,
    unit               TEXT NOT NULL,      -- billing unit: kWh or kgal (thousand gallons)
    unit_rate_mills    INTEGER NOT NULL,   -- per billing unit
    daily_charge_cents INTEGER NOT NULL,   -- fixed service charge per day
    is_open            INTEGER NOT NULL,   -- 0 = closed to new enrolments
    needs_smart_meter  INTEGER NOT NULL,
    needs_assistance   INTEGER NOT NULL    -- 1 = only for accounts enrolled in CARE
);
CREATE TABLE meters (
    meter_id             TEXT PRIMARY KEY,
    premise_id           TEXT NOT NULL REFERENCES premises (premise_id),
    utility              TEXT NOT NULL CHECK (utility IN ('electric', 'water')),
    serial               TEXT NOT NULL UNIQUE,
    meter_type           TEXT NOT NULL CHECK (meter_type IN ('smart', 'standard')),
    tariff_code          TEXT NOT NULL REFERENCES tariffs (tariff_code),
    status               TEXT NOT NULL CHECK (status IN ('connected', 'disconnected')),
    disconnected_on      TEXT,
    installed_on         TEXT NOT NULL,
    last_tariff_change   TEXT,
    INTERNAL_tamper_risk INTEGER NOT NULL  -- 0..99 revenue-protection score; confidential
);
CREATE TABLE readings (
    reading_id TEXT PRIMARY KEY,
    meter_id   TEXT NOT NULL REFERENCES meters (meter_id),
    read_on    TEXT NOT NULL,
    register   INTEGER NOT NULL,  -- cumulative: kWh for electric, gallons for water
    read_type  TEXT NOT NULL CHECK (read_type IN ('actual', 'estimated', 'customer'))
);
CREATE TABLE bills (
    bill_id      TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (account_id),
    period_start TEXT NOT NULL,
    period_end   TEXT NOT NULL,
    issued_on    TEXT NOT NULL,
    due_on       TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    estimated    INTEGER NOT NULL,  -- 1 = based on an estimated reading
    status       TEXT NOT NULL CHECK (status IN ('paid', 'unpaid')),
    paid_on      TEXT
);
CREATE TABLE adjustments (
    adjustment_id TEXT PRIMARY KEY,
    bill_id       TEXT NOT NULL REFERENCES bills (bill_id),
    amount_cents  INTEGER NOT NULL,
    reason        TEXT NOT NULL,  -- free text written by the agent: volatile
    created_on    TEXT NOT NULL
);
CREATE TABLE disputes (
    dispute_id  TEXT PRIMARY KEY,
    bill_id     TEXT NOT NULL REFERENCES bills (bill_id),
    category    TEXT NOT NULL CHECK (category IN ('high_bill', 'estimated_read', 'wrong_meter', 'other')),
    status      TEXT NOT NULL CHECK (status IN ('open', 'upheld', 'rejected')),
    details     TEXT NOT NULL,  -- free text written by the agent: volatile
    opened_on   TEXT NOT NULL
);
CREATE TABLE payment_plans (
    plan_id           TEXT PRIMARY KEY,
    account_id        TEXT NOT NULL REFERENCES accounts (account_id),
    total_cents       INTEGER NOT NULL,
    installments      INTEGER NOT NULL,
    installment_cents INTEGER NOT NULL,
    first_due_on      TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('active', 'completed', 'defaulted')),
    created_on        TEXT NOT NULL
);
CREATE TABLE service_orders (
    order_id      TEXT PRIMARY KEY,
    meter_id      TEXT NOT NULL REFERENCES meters (meter_id),
    order_type    TEXT NOT NULL CHECK (order_type IN ('disconnect', 'reconnect', 'meter_test')),
    status        TEXT NOT NULL CHECK (status IN ('scheduled', 'on_hold', 'completed', 'cancelled')),
    scheduled_for TEXT NOT NULL,
    note          TEXT NOT NULL,  -- free text written by the agent: volatile
    created_on    TEXT NOT NULL
);
CREATE INDEX premises_by_account ON premises (account_id);
CREATE INDEX meters_by_premise ON meters (premise_id);
CREATE INDEX readings_by_meter ON readings (meter_id, read_on);
CREATE INDEX bills_by_account ON bills (account_id);
CREATE INDEX adjustments_by_bill ON adjustments (bill_id);
CREATE INDEX disputes_by_bill ON disputes (bill_id);
CREATE INDEX plans_by_account ON payment_plans (account_id);
CREATE INDEX orders_by_meter ON service_orders (meter_id);

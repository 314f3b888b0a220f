-- Telecom customer-care backend. Money is integer cents; dates are ISO strings.
-- The tickets table is declared with the tool that opens tickets (tools.TICKETS, envs.service_desk).
CREATE TABLE customers (
    customer_id       TEXT PRIMARY KEY,
    full_name         TEXT NOT NULL,
    email             TEXT NOT NULL UNIQUE,
    phone             TEXT NOT NULL UNIQUE,
    date_of_birth     TEXT NOT NULL,
    pin               TEXT NOT NULL,
    tier              TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
    joined_on         TEXT NOT NULL,
    credit_risk_score INTEGER NOT NULL,  -- internal, confidential
    churn_score       REAL NOT NULL      -- internal, confidential
);
CREATE TABLE plans (
    plan_code         TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    monthly_fee_cents INTEGER NOT NULL,
    data_gb           INTEGER NOT NULL,
    is_active         INTEGER NOT NULL  -- 0 = legacy plan, not open to new selections
);
CREATE TABLE addons (
    addon_code        TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    monthly_fee_cents INTEGER NOT NULL
);
CREATE TABLE lines (
    line_id           TEXT PRIMARY KEY,
    customer_id       TEXT NOT NULL REFERENCES customers (customer_id),
    msisdn            TEXT NOT NULL UNIQUE,
    plan_code         TEXT NOT NULL REFERENCES plans (plan_code),
    status            TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    suspension_reason TEXT,
    activated_on      TEXT NOT NULL,
    contract_end      TEXT NOT NULL,
    last_plan_change  TEXT,
    data_used_gb      REAL NOT NULL,
    roaming_enabled   INTEGER NOT NULL
);
CREATE TABLE line_addons (
    line_id    TEXT NOT NULL REFERENCES lines (line_id),
    addon_code TEXT NOT NULL REFERENCES addons (addon_code),
    added_on   TEXT NOT NULL,
    PRIMARY KEY (line_id, addon_code)
);
CREATE TABLE devices (
    device_id    TEXT PRIMARY KEY,
    line_id      TEXT NOT NULL REFERENCES lines (line_id),
    model        TEXT NOT NULL,
    imei         TEXT NOT NULL UNIQUE,
    purchased_on TEXT NOT NULL,
    price_cents  INTEGER NOT NULL,
    insured      INTEGER NOT NULL
);
CREATE TABLE invoices (
    invoice_id   TEXT PRIMARY KEY,
    customer_id  TEXT NOT NULL REFERENCES customers (customer_id),
    issued_on    TEXT NOT NULL,
    due_on       TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('paid', 'unpaid'))
);
CREATE TABLE credits (
    credit_id    TEXT PRIMARY KEY,
    invoice_id   TEXT NOT NULL REFERENCES invoices (invoice_id),
    amount_cents INTEGER NOT NULL,
    reason       TEXT NOT NULL,  -- free text written by the agent: volatile
    created_on   TEXT NOT NULL
);
CREATE TABLE plan_changes (
    change_id  TEXT PRIMARY KEY,
    line_id    TEXT NOT NULL REFERENCES lines (line_id),
    old_plan   TEXT NOT NULL,
    new_plan   TEXT NOT NULL,
    changed_on TEXT NOT NULL
);
CREATE INDEX lines_by_customer ON lines (customer_id);
CREATE INDEX invoices_by_customer ON invoices (customer_id);
CREATE INDEX devices_by_line ON devices (line_id);
CREATE INDEX credits_by_invoice ON credits (invoice_id);

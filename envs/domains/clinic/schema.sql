-- Outpatient clinic front-desk backend (Riverbend Outpatient Clinic).
-- Money is integer cents; dates are ISO strings; appointment times are local 'YYYY-MM-DDTHH:MM'.
-- Columns prefixed INTERNAL_ are confidential scores the desk sees but must never disclose.
-- The requests table is declared with the tool that opens requests (tools_billing.REQUESTS, envs.service_desk).
CREATE TABLE insurance_plans (
    plan_code               TEXT PRIMARY KEY,
    name                    TEXT NOT NULL,
    payer                   TEXT NOT NULL,
    preauth_threshold_cents INTEGER          -- imaging priced above this needs pre-authorisation; NULL: self-pay
);
CREATE TABLE patients (
    patient_id                 TEXT PRIMARY KEY,
    full_name                  TEXT NOT NULL,
    date_of_birth              TEXT NOT NULL,
    postcode                   TEXT NOT NULL,
    phone                      TEXT NOT NULL UNIQUE,
    email                      TEXT NOT NULL UNIQUE,
    plan_code                  TEXT NOT NULL REFERENCES insurance_plans (plan_code),
    member_number              TEXT,
    pharmacy                   TEXT NOT NULL,
    registered_on              TEXT NOT NULL,
    INTERNAL_no_show_risk      REAL NOT NULL,    -- predicted probability of missing a visit
    INTERNAL_collections_score INTEGER NOT NULL  -- billing team's payment-risk score, 100..999
);
CREATE TABLE practitioners (
    practitioner_id  TEXT PRIMARY KEY,
    full_name        TEXT NOT NULL,
    specialty        TEXT NOT NULL,
    requires_referral INTEGER NOT NULL,          -- 1: specialist, bookable only against a referral
    late_fee_cents   INTEGER NOT NULL            -- late-cancellation / no-show fee for this practitioner
);
CREATE TABLE procedures (
    procedure_code   TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    list_price_cents INTEGER NOT NULL
);
CREATE TABLE slots (
    slot_id         TEXT PRIMARY KEY,
    practitioner_id TEXT NOT NULL REFERENCES practitioners (practitioner_id),
    starts_at       TEXT NOT NULL,
    minutes         INTEGER NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('open', 'booked'))
);
CREATE TABLE referrals (
    referral_id     TEXT PRIMARY KEY,
    patient_id      TEXT NOT NULL REFERENCES patients (patient_id),
    specialty       TEXT NOT NULL,
    referred_by     TEXT NOT NULL REFERENCES practitioners (practitioner_id),
    issued_on       TEXT NOT NULL,
    expires_on      TEXT NOT NULL,
    visits_allowed  INTEGER NOT NULL,
    visits_used     INTEGER NOT NULL
);
CREATE TABLE appointments (
    appointment_id  TEXT PRIMARY KEY,
    patient_id      TEXT NOT NULL REFERENCES patients (patient_id),
    practitioner_id TEXT NOT NULL REFERENCES practitioners (practitioner_id),
    slot_id         TEXT REFERENCES slots (slot_id),   -- NULL for history older than the slot calendar
    starts_at       TEXT NOT NULL,
    referral_id     TEXT REFERENCES referrals (referral_id),
    procedure_code  TEXT REFERENCES procedures (procedure_code),
    status          TEXT NOT NULL CHECK (status IN ('booked', 'completed', 'cancelled', 'no_show')),
    booked_on       TEXT NOT NULL,
    cancelled_on    TEXT
);
CREATE TABLE prescriptions (
    rx_id           TEXT PRIMARY KEY,
    patient_id      TEXT NOT NULL REFERENCES patients (patient_id),
    prescriber_id   TEXT NOT NULL REFERENCES practitioners (practitioner_id),
    medication      TEXT NOT NULL,
    controlled      INTEGER NOT NULL,
    days_supply     INTEGER NOT NULL,
    refills_left    INTEGER NOT NULL,
    last_filled_on  TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('active', 'discontinued'))
);
CREATE TABLE fills (
    fill_id   TEXT PRIMARY KEY,
    rx_id     TEXT NOT NULL REFERENCES prescriptions (rx_id),
    filled_on TEXT NOT NULL,
    pharmacy  TEXT NOT NULL
);
CREATE TABLE fees (
    fee_id          TEXT PRIMARY KEY,
    patient_id      TEXT NOT NULL REFERENCES patients (patient_id),
    appointment_id  TEXT REFERENCES appointments (appointment_id),
    kind            TEXT NOT NULL CHECK (kind IN ('late_cancellation', 'no_show')),
    amount_cents    INTEGER NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('unpaid', 'paid', 'waived')),
    charged_on      TEXT NOT NULL,
    waived_on       TEXT
);
CREATE TABLE preauthorisations (
    auth_id         TEXT PRIMARY KEY,
    patient_id      TEXT NOT NULL REFERENCES patients (patient_id),
    procedure_code  TEXT NOT NULL REFERENCES procedures (procedure_code),
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
    submitted_on    TEXT NOT NULL,
    decided_on      TEXT
);
CREATE INDEX slots_by_practitioner ON slots (practitioner_id, starts_at);
CREATE INDEX appointments_by_patient ON appointments (patient_id);
CREATE INDEX referrals_by_patient ON referrals (patient_id);
CREATE INDEX prescriptions_by_patient ON prescriptions (patient_id);
CREATE INDEX fees_by_patient ON fees (patient_id);
CREATE INDEX preauths_by_patient ON preauthorisations (patient_id);

-- Billing's tables, created at start by Billing.Migrate with IF NOT EXISTS
-- (under an advisory lock, see internal/pgschema).
CREATE SCHEMA IF NOT EXISTS {{schema}};

-- One invoice per order: the unique order_id holds even if OrderPlaced came
-- twice under different event ids (the inbox catches same-id duplicates).
CREATE TABLE IF NOT EXISTS {{schema}}.invoices (
    id            uuid        PRIMARY KEY,
    order_id      text        NOT NULL UNIQUE,
    customer_id   text        NOT NULL,
    amount_minor  bigint      NOT NULL,
    currency      text        NOT NULL,
    -- OPEN until paid; VOID when an unpaid order is cancelled; CREDITED
    -- when a paid order is cancelled (see credit_notes).
    status        text        NOT NULL CHECK (status IN ('OPEN', 'PAID', 'VOID', 'CREDITED')),
    -- order_version is the order's version of the last event applied; an
    -- event with a version not above it is stale and ignored.
    order_version bigint      NOT NULL,
    event_id      uuid        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    paid_at       timestamptz
);

-- At most one credit note per order.
CREATE TABLE IF NOT EXISTS {{schema}}.credit_notes (
    id           uuid        PRIMARY KEY,
    order_id     text        NOT NULL UNIQUE,
    invoice_id   uuid        NOT NULL REFERENCES {{schema}}.invoices (id),
    amount_minor bigint      NOT NULL,
    currency     text        NOT NULL,
    event_id     uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

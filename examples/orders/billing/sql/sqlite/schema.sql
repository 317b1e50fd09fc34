-- Billing's tables on SQLite, created at start by Billing.Migrate with IF
-- NOT EXISTS in one write transaction. Amounts are integers of minor units.
--
-- Times are DATETIME columns, which billing writes and reads as time.Time:
-- the driver (modernc.org/sqlite) stores a time.Time as text
-- ("2006-01-02 15:04:05.999999999 -0700 MST", in UTC here), the defaults
-- are strftime's "2006-01-02 15:04:05.000" in UTC, and the driver reads a
-- DATETIME column back into a time.Time. DATETIME is not a type STRICT
-- allows, so these tables are not STRICT. No query compares or sorts by
-- these texts.

-- One invoice per order: the unique order_id holds even if OrderPlaced came
-- twice under different event ids (the inbox catches same-id duplicates).
CREATE TABLE IF NOT EXISTS invoices (
    id            TEXT     PRIMARY KEY,
    order_id      TEXT     NOT NULL UNIQUE,
    customer_id   TEXT     NOT NULL,
    amount_minor  INTEGER  NOT NULL,
    currency      TEXT     NOT NULL,
    -- OPEN until paid; VOID when an unpaid order is cancelled; CREDITED
    -- when a paid order is cancelled (see credit_notes).
    status        TEXT     NOT NULL CHECK (status IN ('OPEN', 'PAID', 'VOID', 'CREDITED')),
    -- order_version is the order's version of the last event applied; an
    -- event with a version not above it is stale and ignored.
    order_version INTEGER  NOT NULL,
    event_id      TEXT     NOT NULL,
    created_at    DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    paid_at       DATETIME
);

-- At most one credit note per order.
CREATE TABLE IF NOT EXISTS credit_notes (
    id           TEXT     PRIMARY KEY,
    order_id     TEXT     NOT NULL UNIQUE,
    invoice_id   TEXT     NOT NULL REFERENCES invoices (id),
    amount_minor INTEGER  NOT NULL,
    currency     TEXT     NOT NULL,
    event_id     TEXT     NOT NULL,
    created_at   DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

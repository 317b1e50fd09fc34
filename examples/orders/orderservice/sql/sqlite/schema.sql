-- The order service's tables on SQLite, created at start by Service.Migrate
-- with IF NOT EXISTS in one write transaction. Amounts are integers of
-- minor units.
--
-- Times are DATETIME columns, which the service writes and reads as
-- time.Time: the driver (modernc.org/sqlite) stores a time.Time as text
-- ("2006-01-02 15:04:05.999999999 -0700 MST", in UTC here) and reads a
-- DATETIME column back into a time.Time. DATETIME is not a type STRICT
-- allows, so these tables are not STRICT. No query compares or sorts by
-- these texts.
CREATE TABLE IF NOT EXISTS orders (
    id           TEXT     PRIMARY KEY,
    customer_id  TEXT     NOT NULL,
    amount_minor INTEGER  NOT NULL CHECK (amount_minor > 0),
    currency     TEXT     NOT NULL,
    items        BLOB     NOT NULL,
    status       TEXT     NOT NULL CHECK (status IN ('PLACED', 'PAID', 'SHIPPED', 'CANCELLED')),
    -- version counts the order's events: 1 after OrderPlaced, +1 per transition.
    version      INTEGER  NOT NULL,
    created_at   DATETIME NOT NULL,
    updated_at   DATETIME NOT NULL
);

-- One row per Idempotency-Key a client sent with POST /orders. Write
-- transactions are serialised by the database's write lock, so a retry
-- runs after the first request's transaction and finds its row. response
-- is the order as first returned.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key          TEXT     PRIMARY KEY,
    request_hash BLOB     NOT NULL,
    order_id     TEXT     NOT NULL,
    response     BLOB     NOT NULL,
    created_at   DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

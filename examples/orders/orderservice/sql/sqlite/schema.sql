-- The order service's tables on SQLite, created at start by Service.Migrate
-- with IF NOT EXISTS in one write transaction. Times are unix microseconds
-- (UTC); amounts are integers of minor units.
CREATE TABLE IF NOT EXISTS orders (
    id           TEXT    PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
    currency     TEXT    NOT NULL,
    items        BLOB    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('PLACED', 'PAID', 'SHIPPED', 'CANCELLED')),
    -- version counts the order's events: 1 after OrderPlaced, +1 per transition.
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

-- One row per Idempotency-Key a client sent with POST /orders. Write
-- transactions are serialised by the database's write lock, so a retry
-- runs after the first request's transaction and finds its row. response
-- is the order as first returned.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key          TEXT    PRIMARY KEY,
    request_hash BLOB    NOT NULL,
    order_id     TEXT    NOT NULL,
    response     BLOB    NOT NULL,
    created_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('now', 'subsec') * 1000000 AS INTEGER))
) STRICT;

-- The inventory's tables on SQLite, created at start by Inventory.Migrate
-- with IF NOT EXISTS in one write transaction.
CREATE TABLE IF NOT EXISTS stock (
    sku       TEXT    PRIMARY KEY,
    -- available can be reserved; reserved is held for orders not yet shipped.
    available INTEGER NOT NULL CHECK (available >= 0),
    reserved  INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0)
) STRICT;

-- One reservation per order (primary key): a second OrderPlaced of the same
-- order, even under another event id, reserves nothing more.
--
-- Times are DATETIME columns, set by the database with strftime in UTC
-- ("2006-01-02 15:04:05.000"), which the driver (modernc.org/sqlite) reads
-- back into a time.Time. DATETIME is not a type STRICT allows, so this
-- table is not STRICT. No query compares or sorts by these texts.
CREATE TABLE IF NOT EXISTS reservations (
    order_id   TEXT     PRIMARY KEY,
    status     TEXT     NOT NULL CHECK (status IN ('RESERVED', 'REJECTED', 'RELEASED', 'SHIPPED')),
    items      BLOB     NOT NULL,
    -- rejected holds the lines that could not be reserved (status REJECTED).
    rejected   BLOB     NOT NULL DEFAULT (CAST('[]' AS BLOB)),
    event_id   TEXT     NOT NULL,
    created_at DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);

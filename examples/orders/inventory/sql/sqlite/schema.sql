-- The inventory's tables on SQLite, created at start by Inventory.Migrate
-- with IF NOT EXISTS in one write transaction. Times are unix microseconds
-- (UTC).
CREATE TABLE IF NOT EXISTS stock (
    sku       TEXT    PRIMARY KEY,
    -- available can be reserved; reserved is held for orders not yet shipped.
    available INTEGER NOT NULL CHECK (available >= 0),
    reserved  INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0)
) STRICT;

-- One reservation per order (primary key): a second OrderPlaced of the same
-- order, even under another event id, reserves nothing more.
CREATE TABLE IF NOT EXISTS reservations (
    order_id   TEXT    PRIMARY KEY,
    status     TEXT    NOT NULL CHECK (status IN ('RESERVED', 'REJECTED', 'RELEASED', 'SHIPPED')),
    items      BLOB    NOT NULL,
    -- rejected holds the lines that could not be reserved (status REJECTED).
    rejected   BLOB    NOT NULL DEFAULT (CAST('[]' AS BLOB)),
    event_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('now', 'subsec') * 1000000 AS INTEGER)),
    updated_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('now', 'subsec') * 1000000 AS INTEGER))
) STRICT;

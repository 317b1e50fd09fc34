-- The inventory's tables, created at start by Inventory.Migrate with IF NOT
-- EXISTS (under an advisory lock, see internal/pgschema).
CREATE SCHEMA IF NOT EXISTS {{schema}};

CREATE TABLE IF NOT EXISTS {{schema}}.stock (
    sku       text   PRIMARY KEY,
    -- available can be reserved; reserved is held for orders not yet shipped.
    available bigint NOT NULL CHECK (available >= 0),
    reserved  bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0)
);

-- One reservation per order (primary key): a second OrderPlaced of the same
-- order, even under another event id, reserves nothing more.
CREATE TABLE IF NOT EXISTS {{schema}}.reservations (
    order_id   text        PRIMARY KEY,
    status     text        NOT NULL CHECK (status IN ('RESERVED', 'REJECTED', 'RELEASED', 'SHIPPED')),
    items      jsonb       NOT NULL,
    -- rejected holds the lines that could not be reserved (status REJECTED).
    rejected   jsonb       NOT NULL DEFAULT '[]',
    event_id   uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

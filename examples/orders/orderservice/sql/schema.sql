-- The order service's tables, created at start by Service.Migrate with
-- IF NOT EXISTS (under an advisory lock, see internal/pgschema).
CREATE SCHEMA IF NOT EXISTS {{schema}};

CREATE TABLE IF NOT EXISTS {{schema}}.orders (
    id           uuid        PRIMARY KEY,
    customer_id  text        NOT NULL,
    amount_minor bigint      NOT NULL CHECK (amount_minor > 0),
    currency     text        NOT NULL,
    items        jsonb       NOT NULL DEFAULT '[]',
    status       text        NOT NULL CHECK (status IN ('PLACED', 'PAID', 'SHIPPED', 'CANCELLED')),
    -- version counts the order's events: 1 after OrderPlaced, +1 per transition.
    version      bigint      NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- One row per Idempotency-Key a client sent with POST /orders. The primary
-- key makes a concurrent retry wait for the first request's transaction and
-- then find its row. response is the order as first returned.
CREATE TABLE IF NOT EXISTS {{schema}}.idempotency_keys (
    key          text        PRIMARY KEY,
    request_hash bytea       NOT NULL,
    order_id     uuid        NOT NULL,
    response     jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

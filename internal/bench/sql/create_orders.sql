-- The business table of the benchmark's writers: what an order service
-- writes in the same transaction as its outbox message.
CREATE TABLE {{schema}}.bench_orders (
    id          uuid          PRIMARY KEY,
    customer_id text          NOT NULL,
    amount      numeric(12,2) NOT NULL,
    created_at  timestamptz   NOT NULL DEFAULT now()
)

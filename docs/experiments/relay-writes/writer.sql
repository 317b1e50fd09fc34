-- One writer transaction: a business row and an outbox row, on one of 10,000 aggregates.
\set aid random(1, 10000)
BEGIN;
INSERT INTO bench_orders (id, customer_id, amount) VALUES (gen_random_uuid(), 'c' || :aid, 12.34);
INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, event_type, event_version, topic, payload, content_type) VALUES (gen_random_uuid(), 'order', :aid::text, 'OrderPlaced', 1, 'orders', convert_to(repeat('x', 256), 'UTF8'), 'application/json');
COMMIT;

-- Loads rows straight into the outbox table, many per statement, for the
-- claim phase's history: rows $1 to $2 of a series, with status $3
-- ('SENT' or 'PENDING'), topic $4 and payload $5. The ids are time-ordered
-- like the UUIDv7 ids Enqueue gives (version 7, with the series number in
-- place of the clock), so the unique index on id grows at its right edge as
-- it does in production; they sort before any real UUIDv7.
INSERT INTO {{schema}}.outbox_messages (
    id, aggregate_type, aggregate_id, event_type, event_version, topic,
    payload, content_type, status, published_at
)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
       'Order', 'history-' || (i % 100000), 'OrderPlaced', 1, $4::text,
       $5::bytea, 'application/json', $3::text,
       CASE WHEN $3::text = 'SENT' THEN now() END
FROM generate_series($1::bigint, $2::bigint) AS i

-- Store.Enqueue / Store.EnqueueSQL: all messages of one call in one statement
-- and one round trip. Each parameter is an array with one element per
-- message; unnest zips them back into rows. headers arrive as JSON text.
--
-- The CTE gives the transaction its id before the rows take their seqs
-- (the identity is evaluated per row, after the CTE's row was fetched). The
-- cursor relay (package relay/cursor) relies on it: a transaction that holds a seq it
-- has not committed yet appears in every snapshot as running, so the relay
-- never passes that seq before the transaction ended. Migration 012's
-- statement trigger does the same for every INSERT; the CTE keeps Enqueue
-- right on its own.
WITH xact AS MATERIALIZED (
    SELECT pg_current_xact_id() AS id
)
INSERT INTO {{schema}}.outbox_messages (
    id, aggregate_type, aggregate_id, event_type, event_version, topic,
    payload, content_type, headers, correlation_id, causation_id, traceparent
)
SELECT u.id, u.aggregate_type, u.aggregate_id, u.event_type, u.event_version, u.topic,
       u.payload, u.content_type, u.headers::jsonb, u.correlation_id, u.causation_id, u.traceparent
FROM xact, unnest(
    $1::uuid[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[],
    $7::bytea[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[]
) AS u (
    id, aggregate_type, aggregate_id, event_type, event_version, topic,
    payload, content_type, headers, correlation_id, causation_id, traceparent
)

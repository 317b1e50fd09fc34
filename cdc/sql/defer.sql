-- Hand aggregates to the table path. $1 aggregate types, $2 aggregate ids,
-- $3 reasons.
INSERT INTO {{schema}}.outbox_cdc_deferred (aggregate_type, aggregate_id, reason)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT DO NOTHING

-- Inbox.Park: keep a message the consumer gave up on. Parking the same
-- record again (after a crash before its offset was committed) keeps the
-- first entry; RETURNING then returns no row.
--
-- $1 id, $2 consumer, $3 message id, $4 event type, $5 aggregate id,
-- $6 topic, $7 partition, $8 offset, $9 record timestamp (NULL if unknown),
-- $10 headers, $11 payload, $12 error, $13 attempts.
INSERT INTO {{schema}}.inbox_parked
    (id, consumer, message_id, event_type, aggregate_id, topic, partition, record_offset,
     record_timestamp, headers, payload, error, attempts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (consumer, topic, partition, record_offset, message_id) DO NOTHING
RETURNING id

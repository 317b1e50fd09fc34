-- SQLiteInbox.Park: keep a message the consumer gave up on. Parking the
-- same record again (after a crash before its offset was committed) keeps
-- the first entry and changes no row.
--
-- ?1 id, ?2 consumer, ?3 message id, ?4 event type, ?5 aggregate id,
-- ?6 topic, ?7 partition, ?8 offset, ?9 record timestamp in unix ms (NULL if
-- unknown), ?10 headers (JSON), ?11 payload, ?12 error, ?13 attempts.
INSERT INTO "{{prefix}}inbox_parked"
    (id, consumer, message_id, event_type, aggregate_id, topic, record_partition, record_offset,
     record_timestamp, headers, payload, error, attempts)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT (consumer, topic, record_partition, record_offset, message_id) DO NOTHING

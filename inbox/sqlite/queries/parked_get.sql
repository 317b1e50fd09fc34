-- SQLiteInbox.Replay: one parked entry of a consumer, by primary key.
--
-- ?1 id, ?2 consumer.
SELECT id, consumer, message_id, event_type, aggregate_id, topic, record_partition, record_offset,
       record_timestamp, headers, payload, error, attempts, parked_at, replayed_at
FROM "{{prefix}}inbox_parked"
WHERE id = ?1 AND consumer = ?2

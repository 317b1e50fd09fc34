-- SQLiteInbox.Parked: parked entries, oldest first. With ?3 false (the
-- default) only entries not yet replayed.
--
-- ?1 consumer ('' for all), ?2 event type ('' for all), ?3 include
-- replayed entries, ?4 limit.
SELECT id, consumer, message_id, event_type, aggregate_id, topic, record_partition, record_offset,
       record_timestamp, headers, payload, error, attempts, parked_at, replayed_at
FROM "{{prefix}}inbox_parked"
WHERE (?1 = '' OR consumer = ?1)
  AND (?2 = '' OR event_type = ?2)
  AND (?3 OR replayed_at IS NULL)
ORDER BY parked_at, id
LIMIT ?4

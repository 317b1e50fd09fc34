-- Store.Enqueue: one message. Enqueue prepares it once per call and runs it
-- for each message, inside the caller's transaction; SQLite runs in the
-- process, so there is no round trip to save by batching rows.
--
-- ?1 id, ?2 aggregate type, ?3 aggregate id, ?4 event type, ?5 event version,
-- ?6 topic, ?7 payload, ?8 content type, ?9 headers (JSON object),
-- ?10 correlation id, ?11 causation id, ?12 traceparent.
INSERT INTO "{{prefix}}messages" (
    id, aggregate_type, aggregate_id, event_type, event_version, topic,
    payload, content_type, headers, correlation_id, causation_id, traceparent
) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)

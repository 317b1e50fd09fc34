-- Store.Cleanup: delete one batch of the oldest SENT messages published at
-- or before a cut-off. One short write transaction per batch, so that the
-- application's writers wait for the lock at most one batch long. The inner
-- SELECT uses messages_sent_by_published_at.
--
-- ?1 age in milliseconds, ?2 batch size.
DELETE FROM "{{prefix}}messages"
WHERE seq IN (
    SELECT seq
    FROM "{{prefix}}messages"
    WHERE status = 'SENT'
      AND published_at <= {{now_ms}} - ?1
    ORDER BY published_at
    LIMIT ?2
)

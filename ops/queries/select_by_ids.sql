-- Ops.Replay and Ops.Discard by id: the seq and status of each message, by
-- the unique index on id. A QUEUED message (cursor mode) is reported as
-- SENT or PENDING by the cursor's position, as pgstore's get.sql does, so
-- that a refusal names the status an operator knows; a leased PENDING or
-- FAILED one as IN_FLIGHT, as there.
--
-- $1 ids.
SELECT m.id, m.seq,
       CASE WHEN m.status IN ('PENDING', 'FAILED') AND m.lease_token IS NOT NULL THEN 'IN_FLIGHT'
            WHEN m.status <> 'QUEUED' THEN m.status
            WHEN m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c) THEN 'SENT'
            ELSE 'PENDING' END
FROM {{schema}}.outbox_messages m
WHERE m.id = ANY ($1::uuid[])
ORDER BY m.seq

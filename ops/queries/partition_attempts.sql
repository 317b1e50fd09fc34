-- Ops.MaintainPartitions: the attempt history of the messages of a
-- partition about to be dropped (they are all SENT or DISCARDED, and past
-- the retention). Runs before the partition is locked, so that it never
-- holds the lock that stops enqueues and claims: the attempts table is
-- small (failures only) and each of its rows is one probe of the
-- partition's primary key.
DELETE FROM {{schema}}.outbox_attempts a
WHERE a.seq IN (SELECT p.seq FROM {{schema}}.{{partition}} p)

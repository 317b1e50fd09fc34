-- Ops.Discard: dead letters to DISCARDED, kept for audit; their aggregates
-- are unblocked (the claim's ordering probe ignores DISCARDED). Like
-- replay.sql, checked again under concurrent change, and in the
-- transaction that writes the audit entry.
--
-- $1 seqs.
UPDATE {{schema}}.outbox_messages
SET status = 'DISCARDED',
    discarded_at = now()
WHERE seq = ANY ($1::bigint[])
  AND status = 'DEAD_LETTER'
RETURNING seq, id

-- Ops.Replay: dead letters back to PENDING, due at once, with their attempts
-- reset; their aggregates are unblocked, and the relay publishes them, and
-- the messages behind them, in seq order. The status predicate is checked
-- again on rows another transaction changed meanwhile, so a message
-- replayed or discarded concurrently is left alone. Runs in the transaction
-- that writes the audit entry. Finds rows by primary key (seq).
--
-- $1 seqs.
UPDATE {{schema}}.outbox_messages
SET status = 'PENDING',
    attempts = 0,
    next_attempt_at = now(),
    last_error = ''
WHERE seq = ANY ($1::bigint[])
  AND status = 'DEAD_LETTER'
RETURNING seq, id

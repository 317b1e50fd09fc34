-- Messages the broker acknowledged from the stream. Only rows still PENDING
-- change: a row another relay holds or sent keeps its state. Finds rows by
-- primary key. $1 seqs.
UPDATE {{schema}}.outbox_messages
SET status = 'SENT',
    published_at = now(),
    last_error = ''
WHERE seq = ANY ($1::bigint[])
  AND status = 'PENDING'

-- Ops.Replay and Ops.Discard by filter: the upper bounds of their batches,
-- from one pass over the dead letters that dead_letters.sql selects (its
-- parameters): the seq of every $12-th of them in seq order, and of the
-- last. Each batch then selects again only within its range of seqs,
-- through outbox_messages_dead, rather than classifying every dead letter
-- left again.
--
-- $6 limit on the dead letters counted (NULL for none), $12 batch size.
SELECT b.seq
FROM (
    SELECT s.seq, row_number() OVER (ORDER BY s.seq) AS n, count(*) OVER () AS total
    FROM (SELECT s.seq FROM ({{dead_letters}}) s ORDER BY s.seq LIMIT $6::bigint) s
) b
WHERE b.n % $12::bigint = 0 OR b.n = b.total
ORDER BY b.seq

-- Ops.Cleanup: the cutoff by the database clock.
--
-- $1 age in milliseconds.
SELECT now() - $1::bigint * interval '1 millisecond'

-- Failpoint builds only (-tags failpoints, OUTBOX_FAILPOINT set to
-- pgstore-mark-sent-before-commit): queued right after the mark in the
-- mark's round trip, after failpoint_watch.sql, it holds the mark's
-- transaction open on the server, the UPDATE done and not committed, so
-- that a crash test can kill the relay there.
SELECT pg_sleep(3600)

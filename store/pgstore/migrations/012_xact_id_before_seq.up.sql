-- Every INSERT into outbox_messages gives its transaction an id before any
-- of its rows takes a seq, whoever wrote the INSERT.
--
-- Cursor mode (queue.go, cursor.go) relies on it: the leader closes a gap
-- in the seqs it read only once every transaction that could still hold
-- that seq has ended, and it tells them apart by transaction id. A
-- transaction that drew a seq before it had an id appears in no snapshot
-- as running, so the leader could pass the seq while it is still open, and
-- its message, committed later below the position, would never be
-- published. Store.Enqueue takes the id first itself (queries/enqueue.sql);
-- this trigger does the same for writers with their own SQL (another
-- service, a script, a database trigger), whose INSERT may be their
-- transaction's first write: PostgreSQL fills the identity in before the
-- row's heap insert gives the transaction its id (nextval gives one itself
-- only when it WAL-logs the sequence, one value in 32). Tested by
-- TestCursor_AnInsertWithItsOwnSQLHoldsThePosition. A statement trigger runs
-- before the statement reads any row, so once per INSERT (or COPY), not
-- per row, and only when the transaction has no id yet: an outbox INSERT
-- after the business change's own writes pays for the WHEN alone (50,000
-- single-row INSERTs in one transaction took as long with it as without;
-- calling the function every time added about 4 µs each).
CREATE FUNCTION {{schema}}.outbox_xact_id() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_messages_xact_id
    BEFORE INSERT ON {{schema}}.outbox_messages
    FOR EACH STATEMENT
    WHEN (pg_current_xact_id_if_assigned() IS NULL)
    EXECUTE FUNCTION {{schema}}.outbox_xact_id();

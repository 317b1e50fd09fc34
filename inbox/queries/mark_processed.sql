-- Inbox.Handle: the first statement of the handler's transaction. A plain
-- INSERT, so that a message already recorded for the consumer fails with
-- unique_violation (SQLSTATE 23505) on the primary key, and a concurrent
-- delivery waits for the transaction that inserted the same key first.
--
-- $1 consumer, $2 message id.
INSERT INTO {{schema}}.inbox_processed (consumer, message_id) VALUES ($1, $2)

-- SQLiteInbox.Handle: the first statement of the handler's write
-- transaction. A plain INSERT, so that a message already recorded for the
-- consumer fails with SQLITE_CONSTRAINT_PRIMARYKEY.
--
-- ?1 consumer, ?2 message id.
INSERT INTO "{{prefix}}inbox_processed" (consumer, message_id) VALUES (?1, ?2)

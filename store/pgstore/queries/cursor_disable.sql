-- DisableCursor, after cursor_check.sql, in its transaction: new messages
-- are PENDING again (claim mode). The ALTER takes an ACCESS EXCLUSIVE lock
-- on outbox_messages until the switch commits: it waits for every
-- transaction that uses the table, among them every read of a leader, and
-- holds back every later one. A relay leads before it reads, so once the
-- lock is granted, any lead under which QUEUED messages were read is
-- committed and visible to cursor_deactivate.sql, which comes next and
-- refuses the switch while it holds; and every read after the switch sees
-- its result (the messages PENDING, the cursor inactive).
ALTER TABLE {{schema}}.outbox_messages ALTER COLUMN status SET DEFAULT 'PENDING'

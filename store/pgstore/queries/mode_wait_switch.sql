-- Store.ModeAfterSwitch: wait until no switch of the relay mode is in
-- progress (Store.SetMode and Migrate hold this lock exclusively until
-- they commit); the lock is released as the statement ends. $1 is the key
-- of migrate_lock.sql.
SELECT pg_advisory_xact_lock_shared($1)

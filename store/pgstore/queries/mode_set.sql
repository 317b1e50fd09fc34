-- Store.SetMode, last in its transaction: record the new mode, when, and
-- who switched ($2; the database role when empty). The trigger of migration
-- 017 may have set the mode already, as the cursor's flag changed.
-- $1 mode, $2 actor.
INSERT INTO {{schema}}.outbox_relay_mode (mode, changed_at, changed_by)
VALUES ($1, now(), coalesce(nullif($2, ''), session_user))
ON CONFLICT (one) DO UPDATE
SET mode = EXCLUDED.mode, changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by

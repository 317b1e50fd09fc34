-- The outbox's relay mode, in one row: how its messages are relayed.
--
--   claim   every relay claims messages and marks each one SENT (the default)
--   cursor  one relay, the leader, reads the QUEUED messages in seq order and
--           keeps its place in outbox_cursor (migration 010)
--   cdc     one relay reads the inserts from the WAL through a logical
--           replication slot (package cdc), which it creates at start
--
-- Store.SetMode ('outbox mode set') switches it, with the steps each pair of
-- modes needs, in one transaction; 'outbox relay' without --mode runs the
-- mode recorded here, and a relay whose mode differs refuses to start.
-- Change it only that way: a bare UPDATE would leave the cursor or a CDC
-- slot behind.
CREATE TABLE {{schema}}.outbox_relay_mode (
    one        bool        PRIMARY KEY DEFAULT true CHECK (one),
    mode       text        NOT NULL CHECK (mode IN ('claim', 'cursor', 'cdc')),
    -- When the outbox entered the mode, and who switched it (SetMode's
    -- actor; the database role for a switch recorded by the trigger below).
    changed_at timestamptz NOT NULL DEFAULT now(),
    changed_by text        NOT NULL
);

-- An existing outbox keeps the mode it is in: cursor when cursor mode is on
-- (outbox_cursor.active), cdc when a slot that a CDC relay recorded (the
-- table outbox_cdc_slots, which the CDC relay creates) still exists in this
-- database and is not lost, else claim. A recorded slot that is gone or
-- lost is one no CDC relay can stream from: the outbox went back to
-- polling (older releases kept the row when the slot was dropped), or its
-- CDC relay refuses to start anyway. A slot counts whether or not a relay
-- streams from it now, since the relays are often stopped for an upgrade.
-- Store.Mode derives the mode the same way until this migration has run
-- (queries/mode_cdc_slots.sql). outbox_cdc_slots may not exist, hence the
-- dynamic statement.
DO $$
DECLARE
    cursor_on  timestamptz;
    slot_since timestamptz;
BEGIN
    SELECT c.enabled_at INTO cursor_on FROM {{schema}}.outbox_cursor c WHERE c.active;
    IF to_regclass('{{schema}}.outbox_cdc_slots') IS NOT NULL THEN
        EXECUTE 'SELECT min(r.created_at)
                 FROM {{schema}}.outbox_cdc_slots r
                 JOIN pg_replication_slots s ON s.slot_name = r.slot_name
                 WHERE s.database = current_database()
                   AND s.wal_status IS DISTINCT FROM ''lost'''
        INTO slot_since;
    END IF;
    INSERT INTO {{schema}}.outbox_relay_mode (mode, changed_at, changed_by)
    VALUES (CASE WHEN cursor_on IS NOT NULL THEN 'cursor'
                 WHEN slot_since IS NOT NULL THEN 'cdc'
                 ELSE 'claim' END,
            coalesce(cursor_on, slot_since, now()),
            'migration 017');
END
$$;

-- outbox_cursor.active stays the flag the relays read on their hot path,
-- and follows the mode: SetMode changes both in one transaction, and this
-- trigger records a change of the flag made any other way (EnableCursor or
-- DisableCursor of a binary older than this migration) as a change of mode,
-- so that the two never disagree. It fires only when active is written,
-- never on the leader's saves.
CREATE FUNCTION {{schema}}.outbox_mode_follows_cursor() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {{schema}}.outbox_relay_mode
    SET mode = CASE WHEN NEW.active THEN 'cursor' ELSE 'claim' END,
        changed_at = now(),
        changed_by = session_user
    WHERE (mode = 'cursor') IS DISTINCT FROM NEW.active;
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_mode_follows_cursor
    AFTER INSERT OR UPDATE OF active ON {{schema}}.outbox_cursor
    FOR EACH ROW
    EXECUTE FUNCTION {{schema}}.outbox_mode_follows_cursor();

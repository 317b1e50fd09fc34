-- NOTIFY only when a relay is idle and waiting for it.
--
-- pg_notify takes a database-wide lock from the commit's start to its end,
-- so every notifying transaction commits alone: no group commit. With a
-- notification on every enqueue, 8 writers that managed about 2,000
-- commits/s fell to about 320 on the test machine. A busy relay does not need
-- the notification (it claims again at once), so a relay registers here when
-- a claim found nothing (Store.Idle) and withdraws when it finds work
-- (Store.Busy); the trigger notifies only while some registration is
-- current. Under a steady backlog nobody notifies. A relay that dies leaves
-- a registration that simply expires.
--
-- UNLOGGED: registrations are ephemeral (lost in a crash, when relays fall
-- back to polling until they register again), and changing them must not
-- wait for a WAL flush.
CREATE UNLOGGED TABLE {{schema}}.outbox_idle_relays (
    relay_id   text        PRIMARY KEY,
    idle_until timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION {{schema}}.outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.outbox_idle_relays WHERE idle_until > clock_timestamp()) THEN
        PERFORM pg_notify({{channel_literal}}, '');
    END IF;
    RETURN NULL;
END
$$;

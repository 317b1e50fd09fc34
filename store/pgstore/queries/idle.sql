-- Store.Idle: relay $1 is idle and wants a NOTIFY on the next commit for the
-- next $2 milliseconds (see migration 008).
INSERT INTO {{schema}}.outbox_idle_relays (relay_id, idle_until)
VALUES ($1, clock_timestamp() + $2::bigint * interval '1 millisecond')
ON CONFLICT (relay_id) DO UPDATE SET idle_until = EXCLUDED.idle_until

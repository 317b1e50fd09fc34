-- Store.SetMode, leaving CDC mode: the slots the CDC relays recorded for
-- this outbox (outbox_cdc_slots, which package cdc creates), their
-- publications, and the walsender streaming from each, if any (a CDC relay
-- that runs). A recorded slot that is gone has no row in
-- pg_replication_slots: exists is false.
SELECT r.slot_name, r.publication, s.slot_name IS NOT NULL, s.active_pid
FROM {{schema}}.outbox_cdc_slots r
LEFT JOIN pg_replication_slots s ON s.slot_name = r.slot_name
ORDER BY r.slot_name

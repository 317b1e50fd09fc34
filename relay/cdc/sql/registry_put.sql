-- Record (or re-record, after --recreate-slot) the slot. $1 slot name,
-- $2 publication, $3 consistent point, $4 relay id.
INSERT INTO {{schema}}.outbox_cdc_slots (slot_name, publication, consistent_lsn, created_by)
VALUES ($1, $2, $3::pg_lsn, $4)
ON CONFLICT (slot_name) DO UPDATE
SET publication = excluded.publication, consistent_lsn = excluded.consistent_lsn,
    created_at = now(), created_by = excluded.created_by

-- $1 slot name.
SELECT consistent_lsn::text, created_at FROM {{schema}}.outbox_cdc_slots WHERE slot_name = $1

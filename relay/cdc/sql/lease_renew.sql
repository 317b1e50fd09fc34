-- The active relay renews its lease; no row changes once another relay took
-- it (the relay has lost the lead). $1 slot, $2 token, $3 lease in
-- milliseconds.
UPDATE {{schema}}.outbox_cdc_leases
SET expires_at = now() + $3::bigint * interval '1 millisecond'
WHERE slot_name = $1
  AND token = $2

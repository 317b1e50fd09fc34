-- The active relay that stops cleanly gives up its lease, so that a
-- standby takes the lead as soon as the advisory lock is free. $1 slot,
-- $2 token.
UPDATE {{schema}}.outbox_cdc_leases
SET token = NULL, expires_at = NULL, holder_pid = NULL, holder_start = NULL
WHERE slot_name = $1
  AND token = $2

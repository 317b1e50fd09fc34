-- Store.Claim, once per Store before its first claim: where the claim
-- floor starts (see queue.go). The seq of the message marked SENT last, or
-- NULL: a backward scan of outbox_messages_sent that stops at its first
-- entry. Those entries are live, unlike the dead entries that marking
-- leaves at the low end of outbox_messages_due, which a scan from seq 0
-- would have to walk.
SELECT seq
FROM {{schema}}.outbox_messages
WHERE status = 'SENT'
ORDER BY published_at DESC
LIMIT 1

-- Store.Busy: relay $1 claims without waiting; writers need not notify it.
DELETE FROM {{schema}}.outbox_idle_relays WHERE relay_id = $1
